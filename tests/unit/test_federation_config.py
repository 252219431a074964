"""Federation's configuration (docs/FEDERATION.md): read from `MESSAGING_NODE`, the peers and their
secrets; each mistake is a system check of its own id, and the server refuses to work with one."""

from __future__ import annotations

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from messaging.conf import options_from_environ
from messaging.federation.config import federation
from messaging.ops import checks as messaging_checks

SECRET = "0123456789abcdef-secret"


def ids() -> list[str]:
    return sorted({m.id for m in checks.run_checks(tags=[messaging_checks.TAG]) if "federation" in m.hint.lower()})


@pytest.fixture
def node(settings):
    def configure(**options):
        settings.MESSAGING = {"REDIS_URL": "redis://127.0.0.1:6379/7", **options}
        return settings

    return configure


def test_off_without_a_node(node):
    node()
    assert federation() is None and ids() == []


def test_peers_from_the_environment(node):
    options = options_from_environ(
        {
            "MESSAGING_NODE": "a",
            "MESSAGING_PEERS": "b=http://127.0.0.1:9002/, c=https://chat-c.example.com/base",
            "MESSAGING_PEER_SECRETS": f"b={SECRET},c={SECRET}c",
        }
    )
    node(**options)
    found = federation()
    assert found.node == "a" and sorted(found.peers) == ["b", "c"]
    assert found.peers["b"].url("/federation/changes") == "http://127.0.0.1:9002/federation/changes"
    assert found.peers["c"].base_url == "https://chat-c.example.com/base"
    assert found.peers["c"].secret == f"{SECRET}c".encode()
    assert ids() == []


def test_a_dict_of_peers_as_an_app_option(node):
    node(NODE="a", PEERS={"b": "http://b.example:8000"}, PEER_SECRETS={"b": SECRET})
    assert federation().peers["b"].base_url == "http://b.example:8000"


@pytest.mark.parametrize("name", ["A", "1a", "a-b", "a" * 17, "a b", ""])
def test_a_node_name_that_does_not_match_is_e004(node, name):
    node(NODE=name or " ")
    assert ids() == ["messaging.E004"]
    with pytest.raises(ImproperlyConfigured, match="E004"):
        federation()


def test_a_peer_without_a_secret_is_e005(node):
    node(NODE="a", PEERS="b=http://127.0.0.1:9002,c=http://127.0.0.1:9003", PEER_SECRETS=f"c={SECRET}")
    assert ids() == ["messaging.E005"]
    with pytest.raises(ImproperlyConfigured, match="'b'"):
        federation()


def test_a_short_secret_is_e005(node):
    node(NODE="a", PEERS="b=http://127.0.0.1:9002", PEER_SECRETS="b=short")
    assert ids() == ["messaging.E005"]


@pytest.mark.parametrize(
    "url",
    [
        "ftp://b.example",
        "b.example:9002",
        "http://",
        "http://user:pw@b.example",
        "http://b.example/?x=1",
        "http://b.example/#top",
        "http://b.example:99999",
    ],
)
def test_a_malformed_url_is_e006(node, url):
    node(NODE="a", PEERS=f"b={url}", PEER_SECRETS=f"b={SECRET}")
    assert ids() == ["messaging.E006"]
    with pytest.raises(ImproperlyConfigured, match="E006"):
        federation()


@pytest.mark.parametrize(
    "peers",
    ["b", "B=http://b.example", "b=http://b.example,b=http://b2.example", "a=http://a.example"],
)
def test_a_malformed_entry_is_e007(node, peers):
    node(NODE="a", PEERS=peers, PEER_SECRETS=f"b={SECRET}")
    assert "messaging.E007" in ids()


def test_peers_without_a_node_are_w004(node):
    node(PEERS="b=http://b.example", PEER_SECRETS=f"b={SECRET}")
    assert ids() == ["messaging.W004"]
    assert federation() is None


def test_a_secret_for_no_peer_is_w004(node):
    node(NODE="a", PEERS="b=http://b.example", PEER_SECRETS=f"b={SECRET},c={SECRET}")
    assert ids() == ["messaging.W004"]
    assert sorted(federation().peers) == ["b"]
