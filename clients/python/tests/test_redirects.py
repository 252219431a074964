"""The client never carries a token across a redirect and takes one for a failed request (PROTOCOL 1.2,
"Outbound requests"), against real local HTTP servers: one that redirects, one that would answer as if
the command ran."""

from __future__ import annotations

import asyncio
import time

import pytest

from messaging_client import Client, Redirected, SignInFailed, http_command, sign_in
from tests.support.http_servers import Recorder, redirector


@pytest.fixture
def elsewhere():
    """Where the redirects point: it answers 200 with what looks like an ack."""
    server = Recorder(200, body=b'{"t": "ack", "d": {"room": "lobby", "seq": 1}}')
    yield server
    server.close()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_http_command_sends_no_token_across_a_redirect_and_fails(elsewhere, status):
    server = redirector(elsewhere.url, status)
    try:
        with pytest.raises(Redirected) as refused:
            http_command(
                server.url.removesuffix("/hook"),
                "room.post",
                {"room": "lobby", "body": "hi"},
                id="c1",
                token="secret-token",
                retries=3,
                backoff_cap=0.01,
            )
        assert refused.value.status == status and refused.value.location == elsewhere.url
        assert elsewhere.requests == []
        # Asked once: a redirect is not a failure that a retry could mend.
        [request] = server.requests
        assert request["headers"]["Authorization"] == "Bearer secret-token" and request["path"] == "/api/commands"
    finally:
        server.close()


def test_sign_in_does_not_follow_a_redirect_of_the_form(elsewhere):
    server = redirector(elsewhere.url)
    try:
        with pytest.raises(SignInFailed, match="redirect"):
            sign_in(server.url.removesuffix("/hook"), "bot")
        assert elsewhere.requests == [] and len(server.requests) == 1
    finally:
        server.close()


async def test_the_socket_does_not_follow_a_redirect_of_its_handshake():
    # Redirected to another path of the same origin, where websockets would send the token again.
    server = Recorder(302, location="/ws/elsewhere/", body=b"")
    client = Client(server.url.removesuffix("/hook"), token="secret-token", backoff_base=0.05, backoff_cap=0.1)
    try:
        await client.start(wait=False)
        deadline = time.monotonic() + 30
        while client.stats["handshake_status:302"] < 2:
            assert time.monotonic() < deadline, client.stats
            await asyncio.sleep(0.05)
        assert client.state != "open"
        assert {r["path"] for r in server.requests} == {"/ws/"}
    finally:
        await client.close()
        server.close()
