"""Requests of a peer under `/federation/` (docs/FEDERATION.md, "Signing"): a request not signed
right is 401 and changes nothing; a peer's sizes, rates and shapes are bounded like a client's."""

from __future__ import annotations

import time

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import AsyncClient

from messaging.federation.signing import signed_headers
from messaging.models import CommandRecord, Message, Room

pytestmark = [pytest.mark.django_db(transaction=True)]

SECRET = "the-secret-of-the-pair-a-b"


@pytest.fixture
def node_a(settings):
    settings.MESSAGING = {
        **settings.MESSAGING,
        "NODE": "a",
        "PEERS": "b=http://127.0.0.1:9/",
        "PEER_SECRETS": f"b={SECRET}",
    }
    return settings


def post_command(body: str = "hello", command_id: str = "c1", room: str = "lobby") -> dict:
    return {
        "user": {"id": "7", "name": "Bo"},
        "commands": [
            {"id": f"{command_id}-join", "t": "room.join", "d": {"room": room}},
            {"id": command_id, "t": "room.post", "d": {"room": room, "body": body}},
        ],
    }


async def send(path: str, body: bytes, headers: dict[str, str] | None = None):
    response = await AsyncClient().post(
        path, data=body, content_type="application/json", headers={k: v for k, v in (headers or {}).items()}
    )
    return response.status_code, orjson.loads(response.content)


def signed(body: bytes, **kwargs) -> dict[str, str]:
    return signed_headers(
        SECRET.encode(), kwargs.get("sender", "b"), kwargs.get("receiver", "a"), body, now=kwargs.get("now")
    )


async def nothing_changed() -> bool:
    def counts():
        return (
            get_user_model().objects.filter(username__startswith="b:").count(),
            Room.objects.count(),
            Message.objects.count(),
            CommandRecord.objects.count(),
        )

    return await sync_to_async(counts)() == (0, 0, 0, 0)


async def test_a_signed_request_is_applied_as_the_peers_user(node_a):
    body = orjson.dumps(post_command())
    status, answer = await send("/federation/commands", body, signed(body))
    assert status == 200, answer
    join, post = answer["acks"]
    assert join["ok"] and post["ok"] and post["d"]["seq"] == 1
    assert [entry["user"] for entry in join["d"]["members"]] == [{"node": "b", "id": "7", "name": "Bo"}]
    sender = await sync_to_async(lambda: Message.objects.select_related("sender").get().sender)()
    assert sender.username == "b:7" and not sender.has_usable_password()


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda body: ({}, body), id="unsigned"),
        pytest.param(lambda body: (signed(body), body.replace(b"hello", b"HELLO")), id="body-changed"),
        pytest.param(lambda body: (signed(body, receiver="c"), body), id="for-another-receiver"),
        pytest.param(lambda body: (signed(body, now=time.time() - 301), body), id="too-old"),
        pytest.param(lambda body: ({**signed(body), "Messaging-Node": "c"}, body), id="no-such-peer"),
        pytest.param(
            lambda body: (signed_headers(b"another-secret-of-16-chars", "b", "a", body), body), id="wrong-secret"
        ),
    ],
)
async def test_a_request_not_signed_right_is_401_and_changes_nothing(node_a, tamper):
    headers, body = tamper(orjson.dumps(post_command()))
    for path in ("/federation/commands", "/federation/changes", "/federation/fetch"):
        status, answer = await send(path, body, headers)
        assert status == 401 and answer["error"]["code"] == "unauthenticated", answer
    assert await nothing_changed()


async def test_a_body_over_the_limit_is_413_and_changes_nothing(node_a, settings):
    settings.MESSAGING = {**settings.MESSAGING, "FEDERATION_MAX_BODY": 2000}
    body = orjson.dumps(post_command(body="x" * 3000))
    status, answer = await send("/federation/commands", body, signed(body))
    assert status == 413 and answer["error"]["code"] == "too_large"
    assert await nothing_changed()


async def test_a_peer_past_its_rate_is_429(node_a, settings):
    settings.MESSAGING = {**settings.MESSAGING, "FEDERATION_PEER_RATE": 1.0}
    statuses = []
    for n in range(3):
        body = orjson.dumps({"room": "lobby", "after_rev": n})
        statuses.append((await send("/federation/fetch", body, signed(body)))[0])
    # A burst of two, then refused: the room is not shared with b (400) until then.
    assert statuses == [400, 400, 429]


@pytest.mark.parametrize(
    "payload",
    [
        {"user": {"id": "7", "name": "Bo"}, "commands": "room.post"},
        {"user": {"id": "7", "name": "Bo"}, "commands": []},
        {"user": "7", "commands": [{"id": "c", "t": "room.join", "d": {"room": "lobby"}}]},
        {"user": {"id": "7", "name": "Bo"}, "commands": [{"id": "c" * 65, "t": "room.join", "d": {"room": "lobby"}}]},
        {"user": {"id": "7", "name": "Bo"}, "commands": [{"id": "c", "t": "room.join", "d": {}}] * 65},
        [],
    ],
)
async def test_a_request_of_the_wrong_shape_is_400_and_changes_nothing(node_a, payload):
    body = orjson.dumps(payload)
    status, answer = await send("/federation/commands", body, signed(body))
    assert status == 400, answer
    assert await nothing_changed()


async def test_commands_that_are_not_carried_are_refused_one_by_one(node_a):
    payload = {
        "user": {"id": "7", "name": "Bo"},
        "commands": [
            {"id": "c1", "t": "room.create", "d": {"room": "den", "private": False}},
            {"id": "c2", "t": "room.join", "d": {"room": "lobby@c"}},
            {"id": "c3", "t": "room.join", "d": {"room": "lobby"}},
        ],
    }
    body = orjson.dumps(payload)
    status, answer = await send("/federation/commands", body, signed(body))
    assert status == 200
    assert [(a["ok"], a.get("error", {}).get("code")) for a in answer["acks"]] == [
        (False, "invalid"),
        (False, "invalid"),
        (True, None),
    ]


async def test_federation_off_is_404(settings):
    body = orjson.dumps(post_command())
    status, answer = await send("/federation/commands", body, signed(body))
    assert status == 404
    assert await nothing_changed()
