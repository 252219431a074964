"""`Client(transport="sse")`: the event stream and `POST /api/commands` instead of a WebSocket, against real
daphne and uvicorn processes of the demo project."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from messaging.models import Message
from messaging.transport.tokens import create_token
from messaging_client import Client, Refused
from tests.conftest import start_uvicorn  # noqa: F401

pytestmark = [pytest.mark.e2e]


def user_with_token(name: str) -> str:
    user = get_user_model().objects.create_user(username=name, first_name=name)
    return create_token(user, "client")[1]


def stored(room: str) -> list[tuple[int, str]]:
    return list(Message.objects.filter(room__slug=room).order_by("seq").values_list("seq", "body"))


@pytest.fixture(params=["daphne", "uvicorn"])
def start(request, start_daphne, start_uvicorn):  # noqa: F811
    return start_daphne if request.param == "daphne" else start_uvicorn


@pytest.fixture
async def clients():
    opened: list[Client] = []

    async def open_client(*args, **kwargs) -> Client:
        client = Client(*args, **kwargs)
        opened.append(client)
        return await client.start()

    yield open_client
    await asyncio.gather(*(c.close() for c in opened))


async def until(check, what: str) -> None:
    for _ in range(600):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(what)


async def test_a_stream_client_and_a_socket_client_talk_each_message_once(start, clients):
    server = start()
    ana_token, bob_token = await sync_to_async(user_with_token)("ana"), await sync_to_async(user_with_token)("bob")
    ana = await clients(server.url, token=ana_token, transport="sse")
    bob = await clients(server.url, token=bob_token)
    assert (await ana.join("lobby"))["room"] == "lobby"
    await bob.join("lobby")
    await ana.post("lobby", "over http", id="ana-1")
    # The same id again: the original ack, nothing applied twice.
    assert (await ana.submit("room.post", {"room": "lobby", "body": "over http"}, id="ana-1"))["dup"] is True
    await bob.post("lobby", "to the stream")
    await until(lambda: [m["body"] for m in ana.messages("lobby")] == ["over http", "to the stream"], "ana heard")
    await until(lambda: [m["body"] for m in bob.messages("lobby")] == ["over http", "to the stream"], "bob heard")
    # A second room: one stream of both, the first room still heard.
    await ana.join("dev")
    await bob.post("lobby", "still here")
    await until(lambda: [m["body"] for m in ana.messages("lobby")][-1:] == ["still here"], "ana heard the first room")
    with pytest.raises(Refused):
        await ana.request("room.history", {"room": "lobby", "before": 0})
    assert await sync_to_async(stored)("lobby") == [(1, "over http"), (2, "to the stream"), (3, "still here")]


async def test_a_stream_client_dropped_gets_what_it_missed_once_in_order(start, clients):
    server = start()
    ana_token, bob_token = await sync_to_async(user_with_token)("ana"), await sync_to_async(user_with_token)("bob")
    ana = await clients(server.url, token=ana_token, transport="sse", backoff_base=0.05)
    bob = await clients(server.url, token=bob_token)
    await ana.join("lobby")
    await bob.join("lobby")
    await bob.post("lobby", "before")
    await until(lambda: ana.messages("lobby"), "ana heard the first")
    ana.drop()
    for n in range(10):
        await bob.post("lobby", f"while away {n}")
    await bob.post("lobby", "after")
    await until(lambda: [m["body"] for m in ana.messages("lobby")][-1:] == ["after"], "ana caught up")
    assert [m["seq"] for m in ana.messages("lobby")] == list(range(1, 13))
    assert ana.stats["connects"] >= 2


async def test_a_stream_client_of_a_revoked_token_stops(start, clients):
    server = start()
    with pytest.raises(ValueError):
        Client(server.url, session="x", transport="sse")
    client = Client(server.url, token="not-a-token", transport="sse")
    with pytest.raises(Exception) as stopped:
        await client.start(timeout=20)
    await client.close()
    assert "4401" in str(stopped.value)
