"""A stranger's handshakes to paths without a route, under real daphne and uvicorn processes of the demo project
(`ProtocolRouter` and `PathRouter`, messaging/transport/routing.py): each is refused before a WebSocket opens, and the
signed-in socket open beside them goes on as before."""

from __future__ import annotations

import json

import pytest

from messaging_client import sign_in

from ..support.rawws import RawSocket

pytestmark = [pytest.mark.e2e]

UNROUTED = ("/ws/nope/", "/nope", "/ws", "/ws/../ws/x", "/ws/%00/", "/" + "a" * 4000)


def ack_of(ws: RawSocket, command_id: str) -> dict:
    while True:
        opcode, payload = ws.frame()
        if opcode == 0x1 and json.loads(payload).get("id") == command_id:
            return json.loads(payload)


def test_under_daphne_a_handshake_without_a_route_is_refused_and_spares_the_socket_beside_it(daphne):
    refused_beside_a_socket(daphne(), "daphne")


def test_under_uvicorn_a_handshake_without_a_route_is_refused_and_spares_the_socket_beside_it(uvicorn):
    refused_beside_a_socket(uvicorn(), "uvicorn")


def refused_beside_a_socket(server, kind: str) -> None:
    ana = RawSocket(server.url, sign_in(server.url, f"routedana{kind}")).connect()
    try:
        stranger = sign_in(server.url, f"routedeve{kind}")
        for path in UNROUTED:
            with pytest.raises(ConnectionError, match="handshake"):
                RawSocket(server.url, stranger, path=path).connect()
        ana.send_command("room.join", {"room": "lobby"}, id="join-after")
        assert ack_of(ana, "join-after")["ok"] is True
        ana.send_command("room.post", {"room": "lobby", "body": "still here"}, id="post-after")
        assert ack_of(ana, "post-after")["ok"] is True
        # The same stranger, at the route, opens a socket as anyone does.
        RawSocket(server.url, stranger).connect().close()
    finally:
        ana.close()
