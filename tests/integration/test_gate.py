"""The deployed handshake layer (`SocketGate`, messaging/transport/gate.py) in front of the real consumer:
it signs in by session or API token, refuses before the session is read, and keeps little per socket."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings

from messaging.transport.gate import SocketGate, cookies_of
from messaging.transport.routing import websocket_urlpatterns
from messaging.transport.tokens import create_token
from project.asgi import application

from .test_hostile import signed_in_session

pytestmark = [pytest.mark.django_db(transaction=True)]

PAGE = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]


def session_cookie(key: str) -> tuple[bytes, bytes]:
    return b"cookie", f"theme=dark; {django_settings.SESSION_COOKIE_NAME}={key}".encode()


async def joined(comm: WebsocketCommunicator) -> bool:
    await comm.send_json_to({"id": "j1", "t": "room.join", "d": {"room": "lobby"}})
    return (await comm.receive_json_from(timeout=10))["ok"]


def awaited_chain(comm: WebsocketCommunicator) -> list:
    """The coroutines the socket's task is suspended in, outermost first."""
    chain, coro = [], comm.future.get_coro()
    while hasattr(coro, "cr_frame") and coro.cr_frame is not None:
        chain.append(coro)
        coro = coro.cr_await
    return chain


async def test_a_session_cookie_signs_the_socket_in(make_user):
    user = await make_user("reader")
    key = await database_sync_to_async(signed_in_session)(user)
    comm = WebsocketCommunicator(application, "/ws/", headers=[*PAGE, session_cookie(key)])
    assert (await comm.connect(timeout=10))[0]
    assert await joined(comm)
    await comm.disconnect()


async def test_an_api_token_signs_the_socket_in_and_a_wrong_one_is_closed_4401(make_user):
    user = await make_user("bot")
    _, token = await database_sync_to_async(create_token)(user)
    for authorization, signed_in in ((f"Bearer {token}", True), ("Bearer msg_wrong", False)):
        comm = WebsocketCommunicator(application, "/ws/", headers=[*PAGE, (b"authorization", authorization.encode())])
        assert (await comm.connect(timeout=10))[0]
        if signed_in:
            assert await joined(comm)
        else:
            assert (await comm.receive_output(timeout=10))["code"] == 4401
        await comm.disconnect()


async def test_a_foreign_origin_is_refused_without_reading_the_session(make_user, monkeypatch):
    from messaging.transport import gate

    key = await database_sync_to_async(signed_in_session)(await make_user())
    reads = []
    real = gate.signed_in_user
    monkeypatch.setattr(gate, "signed_in_user", lambda scope: reads.append(scope) or real(scope))
    refused = WebsocketCommunicator(
        application,
        "/ws/",
        headers=[(b"origin", b"http://evil.example"), (b"host", b"127.0.0.1:8000"), session_cookie(key)],
    )
    assert not (await refused.connect(timeout=10))[0]
    assert reads == []
    accepted = WebsocketCommunicator(application, "/ws/", headers=[*PAGE, session_cookie(key)])
    assert (await accepted.connect(timeout=10))[0]
    assert len(reads) == 1
    await accepted.disconnect()


async def test_the_socket_keeps_one_copy_of_the_scope_and_no_decoded_session(make_user):
    user = await make_user("idle")
    key = await database_sync_to_async(signed_in_session)(user)
    app = SocketGate(URLRouter(websocket_urlpatterns))
    comm = WebsocketCommunicator(app, "/ws/", headers=[*PAGE, session_cookie(key)])
    assert (await comm.connect(timeout=10))[0]
    assert await joined(comm)
    chain = awaited_chain(comm)
    names = [coro.cr_code.co_qualname for coro in chain]
    consumer = names.index("ChatConsumer.__call__")
    # Above the consumer: the gate, the router and channels' per-socket app, nothing else
    # (channels' stack with the throttle and origin layers kept six more frames).
    assert names[:consumer] == ["SocketGate.__call__", "URLRouter.__call__", "AsyncConsumer.as_asgi.<locals>.app"]
    scopes = {
        id(coro.cr_frame.f_locals["scope"]) for coro in chain[: consumer + 1] if "scope" in coro.cr_frame.f_locals
    }
    # The gate's copy and the router's: no copy per middleware, and the gate let the handshake's own go.
    assert len(scopes) == 2
    session = chain[consumer].cr_frame.f_locals["self"].scope["session"]
    assert session.session_key == key and not hasattr(session, "_session_cache")
    await comm.disconnect()


async def test_the_deployed_stack_keeps_the_gate_and_the_consumer_and_one_scope(make_user):
    user = await make_user("lean")
    key = await database_sync_to_async(signed_in_session)(user)
    comm = WebsocketCommunicator(application, "/ws/", headers=[*PAGE, session_cookie(key)])
    assert (await comm.connect(timeout=10))[0]
    assert await joined(comm)
    chain = awaited_chain(comm)
    # `ProtocolRouter` and `PathRouter` hand the connection over: no router's
    # frame and no `as_asgi()` wrapper waits out the socket's life.
    assert [coro.cr_code.co_qualname for coro in chain[:2]] == ["SocketGate.__call__", "ChatConsumer.__call__"]
    gate, consumer = (coro.cr_frame.f_locals for coro in chain[:2])
    # The gate let the server's scope go; the socket lives on the router's copy alone.
    assert "scope" not in gate
    assert consumer["scope"] is consumer["self"].scope
    assert consumer["scope"]["url_route"] == {"args": (), "kwargs": {}}
    assert consumer["scope"]["user"].pk == user.pk
    await comm.disconnect()


def test_cookies_are_read_from_the_first_cookie_header():
    scope = {"headers": [(b"host", b"x"), (b"cookie", b"a=1; b=2"), (b"cookie", b"a=3")]}
    assert cookies_of(scope) == {"a": "1", "b": "2"}
    assert cookies_of({"headers": []}) == {}


async def test_the_gate_guards_websockets_only():
    with pytest.raises(ValueError):
        await SocketGate(None)({"type": "http"}, None, None)


async def test_two_sockets_share_their_common_header_pairs_and_keep_their_cookies(make_user):
    keys = [await database_sync_to_async(signed_in_session)(await make_user(f"pairs{n}")) for n in range(2)]
    agent = (b"user-agent", b"Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/133.0")
    # Each connection's own bytes objects, as a server builds them.
    headers = [[(n, v) for n, v in (*PAGE, agent, session_cookie(key))] for key in keys]
    headers = [[(bytes(bytearray(n)), bytes(bytearray(v))) for n, v in pairs] for pairs in headers]
    comms = [WebsocketCommunicator(application, "/ws/", headers=pairs) for pairs in headers]
    for comm in comms:
        assert (await comm.connect(timeout=10))[0]
        assert await joined(comm)
    first, second = headers
    assert all(mine is theirs for mine, theirs in zip(first[:3], second[:3], strict=True))
    assert first[3] is not second[3] and first[3][1] != second[3][1]
    for comm in comms:
        await comm.disconnect()
