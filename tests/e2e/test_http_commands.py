"""Commands over HTTP against two real daphne processes on one PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from messaging.models import Message
from messaging.transport.tokens import create_token
from messaging_client import Client, http_command

from ..support.servers import ROOT

pytestmark = [pytest.mark.e2e]


def stored(room: str) -> list[tuple[int, str, str]]:
    return list(Message.objects.filter(room__slug=room).order_by("seq").values_list("seq", "client_msg_id", "body"))


def user_with_token(name: str) -> tuple[object, str]:
    user = get_user_model().objects.create_user(username=name, first_name=name)
    return user, create_token(user, "e2e")[1]


def post(server, token: str, t: str, d: dict, key: str | None = None) -> tuple[int, dict, dict]:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    status, response_headers, body = server.request("POST", "/api/commands", json.dumps({"t": t, "d": d}), headers)
    return status, json.loads(body), response_headers


@pytest.fixture
async def clients():
    opened: list[Client] = []

    async def open_client(*args, **kwargs) -> Client:
        client = Client(*args, **kwargs)
        opened.append(client)
        return await client.start()

    yield open_client
    await asyncio.gather(*(c.close() for c in opened))


async def test_a_post_over_http_on_one_process_reaches_a_socket_on_the_other_once(start_daphne, clients):
    a, b = start_daphne(), start_daphne()
    _, ana_token = await sync_to_async(user_with_token)("ana")
    _, bob_token = await sync_to_async(user_with_token)("bob")
    bob = await clients(b.url, token=bob_token)
    await bob.join("lobby")
    assert (await asyncio.to_thread(post, a, ana_token, "room.join", {"room": "lobby"}))[0] == 200
    status, ack, _ = await asyncio.to_thread(post, a, ana_token, "room.post", {"room": "lobby", "body": "hi"}, "p-1")
    assert status == 200 and not ack["dup"]
    # The replay, on the other process, broadcasts nothing more.
    status, again, headers = await asyncio.to_thread(
        post, b, ana_token, "room.post", {"room": "lobby", "body": "hi"}, "p-1"
    )
    assert status == 200 and again["dup"] and headers["idempotent-replayed"] == "true"
    await bob.post("lobby", "after")
    while len(bob.messages("lobby")) < 2:
        await asyncio.sleep(0.05)
    assert [(m["seq"], m["body"]) for m in bob.messages("lobby")] == [(1, "hi"), (2, "after")]


async def test_one_key_sent_at_once_to_both_processes_applies_once(start_daphne):
    servers = [start_daphne(), start_daphne()]
    _, token = await sync_to_async(user_with_token)("ana")
    await asyncio.to_thread(post, servers[0], token, "room.join", {"room": "lobby"})
    with ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(
                lambda i: post(servers[i % 2], token, "room.post", {"room": "lobby", "body": "x"}, "same-key"), range(8)
            )
        )
    assert [status for status, _, _ in answers] == [200] * 8, answers
    assert sorted(ack["dup"] for _, ack, _ in answers) == [False] + [True] * 7
    assert len({json.dumps(ack["d"]) for _, ack, _ in answers}) == 1
    assert await sync_to_async(stored)("lobby") == [(1, "same-key", "x")]


async def test_one_id_over_http_and_a_socket_of_the_other_process_is_one_command(start_daphne, clients):
    a, b = start_daphne(), start_daphne()
    _, token = await sync_to_async(user_with_token)("ana")
    socket = await clients(b.url, token=token)
    await socket.join("lobby")
    # Socket first, then HTTP on the other process ...
    first = await socket.submit("room.post", {"room": "lobby", "body": "one"}, id="x-1")
    status, ack, _ = await asyncio.to_thread(post, a, token, "room.post", {"room": "lobby", "body": "one"}, "x-1")
    assert status == 200 and ack["dup"] and ack["d"] == first["d"]
    # ... and HTTP first, then the socket.
    status, ack, _ = await asyncio.to_thread(post, a, token, "room.post", {"room": "lobby", "body": "two"}, "x-2")
    again = await socket.submit("room.post", {"room": "lobby", "body": "two"}, id="x-2")
    assert status == 200 and not ack["dup"] and again["dup"] and again["d"] == ack["d"]
    assert await sync_to_async(stored)("lobby") == [(1, "x-1", "one"), (2, "x-2", "two")]


async def test_http_command_retries_with_its_key_through_a_killed_server(start_daphne):
    server = start_daphne()
    _, token = await sync_to_async(user_with_token)("ana")
    assert (await asyncio.to_thread(http_command, server.url, "room.join", {"room": "lobby"}, token=token))[0] == 200
    status, first = await asyncio.to_thread(
        http_command, server.url, "room.post", {"room": "lobby", "body": "a"}, id="r-1", token=token
    )
    server.kill()
    # Down: the client retries with the same key until the server is back.
    retrying = asyncio.ensure_future(
        asyncio.to_thread(
            http_command,
            server.url,
            "room.post",
            {"room": "lobby", "body": "a"},
            id="r-1",
            token=token,
            retries=40,
            backoff_cap=0.5,
        )
    )
    await asyncio.sleep(0.5)
    await asyncio.to_thread(server.start)
    status, again = await retrying
    assert status == 200 and again["dup"] and again["d"] == first["d"]
    assert await sync_to_async(stored)("lobby") == [(1, "r-1", "a")]


async def test_the_bot_with_a_token_keeps_a_conversation_through_a_killed_and_restarted_server(
    start_daphne, clients, tmp_path
):
    server = start_daphne()
    _, ana_token = await sync_to_async(user_with_token)("ana")
    _, bot_token = await sync_to_async(user_with_token)("bot")
    ana = await clients(server.url, token=ana_token, backoff_cap=0.5)
    await ana.join("lobby")
    bot = subprocess.Popen(
        [sys.executable, "examples/bot.py", server.url, "--room", "lobby", "--state", str(tmp_path / "bot")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MESSAGING_TOKEN": bot_token},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    async def replies(count: int) -> list[str]:
        while True:
            bodies = [m["body"] for m in ana.messages("lobby") if not m["body"].startswith("!echo")]
            if len(bodies) >= count:
                return bodies
            await asyncio.sleep(0.05)

    try:
        await ana.post("lobby", "!echo one")
        assert await asyncio.wait_for(replies(1), 60) == ["one"]
        server.kill()
        # Sent while the server is down: ana's outbox holds it, the bot reconnects.
        sending = asyncio.ensure_future(ana.post("lobby", "!echo two"))
        await asyncio.sleep(0.5)
        await asyncio.to_thread(server.start)
        await asyncio.wait_for(sending, 60)
        assert await asyncio.wait_for(replies(2), 60) == ["one", "two"]
        await ana.post("lobby", "!echo three")
        assert await asyncio.wait_for(replies(3), 60) == ["one", "two", "three"]
        await asyncio.sleep(1)  # time enough for a second answer to show, if there were one
        assert [body for _, _, body in await sync_to_async(stored)("lobby")] == [
            "!echo one",
            "one",
            "!echo two",
            "two",
            "!echo three",
            "three",
        ]
    finally:
        bot.kill()
        bot.wait()
