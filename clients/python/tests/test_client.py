"""The client library against real daphne processes: one effect per action, every message once."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from messaging.models import CommandRecord, Message
from messaging_client import Client, FileStore, Refused, Unauthorized, asign_in

pytestmark = [pytest.mark.e2e]


def stored(room: str) -> list[tuple[int, str]]:
    return list(Message.objects.filter(room__slug=room).order_by("seq").values_list("seq", "body"))


@pytest.fixture
async def clients():
    opened: list[Client] = []

    async def open_client(*args, **kwargs) -> Client:
        client = Client(*args, **kwargs)
        opened.append(client)
        return await client.start()

    yield open_client
    await asyncio.gather(*(c.close() for c in opened))


async def test_posts_through_a_server_killed_and_a_client_restarted_are_stored_once(start_daphne, clients, tmp_path):
    servers = [start_daphne(), start_daphne()]
    urls = [s.url for s in servers]
    session = await asign_in(urls[0], "bot")
    path = tmp_path / "outbox.json"
    first = await clients(urls, session=session, store=FileStore(path), backoff_cap=1)
    await first.join("lobby")
    sending = [asyncio.ensure_future(first.submit("room.post", {"room": "lobby", "body": f"m{n}"})) for n in range(30)]
    await asyncio.sleep(0.2)
    servers[0].kill()  # some acks in, the rest in flight
    await asyncio.sleep(0.3)
    await first.close()  # the process "dies" with its outbox on disk
    for task in sending:
        task.cancel()
    second = await clients(urls[1:], session=session, store=FileStore(path), backoff_cap=1)
    assert await second.settled(60)
    bodies = [body for _, body in await sync_to_async(stored)("lobby")]
    assert sorted(bodies, key=lambda b: int(b[1:])) == [f"m{n}" for n in range(30)]
    assert len(bodies) == len(set(bodies)) == 30
    assert await sync_to_async(CommandRecord.objects.filter(type="room.post").count)() == 30


async def test_a_client_away_gets_what_it_missed_once_in_order(start_daphne, clients):
    server = start_daphne()
    reader = await clients(server.url, session=await asign_in(server.url, "reader"), backoff_base=0.05)
    writer = await clients(server.url, session=await asign_in(server.url, "writer"))
    await reader.join("lobby")
    await writer.join("lobby")
    await writer.post("lobby", "before")
    reader.drop()
    for n in range(10):
        await writer.post("lobby", f"while away {n}")
    await writer.post("lobby", "after")

    async def caught_up() -> None:
        while [m["body"] for m in reader.messages("lobby")][-1:] != ["after"]:
            await asyncio.sleep(0.05)

    await asyncio.wait_for(caught_up(), 30)
    assert [m["seq"] for m in reader.messages("lobby")] == list(range(1, 13))
    assert reader.stats["connects"] >= 2


async def test_a_replay_cut_short_is_joined_again_from_where_it_stopped(start_daphne, clients):
    server = start_daphne(MESSAGING_REPLAY_LIMIT="5")
    writer = await clients(server.url, session=await asign_in(server.url, "writer"))
    reader = await clients(server.url, session=await asign_in(server.url, "reader"), backoff_base=0.05)
    await writer.join("lobby")
    await reader.join("lobby")
    reader.drop()
    for n in range(1, 13):
        await writer.post("lobby", f"m{n}")

    async def all_twelve() -> None:
        while len(reader.messages("lobby")) < 12:
            await asyncio.sleep(0.05)

    # Quiet room: no live message reveals the gap; the client sees the ack's last_seq.
    await asyncio.wait_for(all_twelve(), 30)
    assert [m["body"] for m in reader.messages("lobby")] == [f"m{n}" for n in range(1, 13)]


async def test_events_stream_each_message_once_and_the_acks_of_the_outbox(start_daphne, clients):
    server = start_daphne()
    client = await clients(server.url, session=await asign_in(server.url, "ana"))
    await client.join("lobby")
    events = client.events()
    ack = await client.submit("room.post", {"room": "lobby", "body": "hi"})
    seen = [await asyncio.wait_for(events.__anext__(), 10) for _ in range(2)]
    assert {e["t"] for e in seen} == {"ack", "msg"}
    assert next(e for e in seen if e["t"] == "msg")["d"]["id"] == ack["id"]


async def test_a_refusal_is_final_and_leaves_the_outbox(start_daphne, clients):
    server = start_daphne()
    client = await clients(server.url, session=await asign_in(server.url, "ana"))
    with pytest.raises(Refused) as refused:
        await client.submit("room.post", {"room": "nowhere", "body": "hi"})
    assert refused.value.code == "forbidden" and len(client.outbox) == 0
    with pytest.raises(Refused) as invalid:
        await client.request("receipt", {"room": "nowhere"})
    assert invalid.value.code == "invalid"


async def test_a_session_that_signs_nobody_in_stops_the_client(start_daphne):
    server = start_daphne()
    client = Client(server.url, session="not-a-session")
    with pytest.raises(Unauthorized):
        await client.start(timeout=30)
    await client.close()
    assert client.stats["close:4401"] == 1


async def test_an_action_whose_ack_was_lost_is_resent_with_its_id_and_applied_once(start_daphne, clients, tmp_path):
    server = start_daphne()
    session = await asign_in(server.url, "bot")
    path = tmp_path / "outbox.json"
    first = await clients(server.url, session=session, store=FileStore(path))
    await first.join("lobby")
    ack = await first.submit("room.post", {"room": "lobby", "body": "once"})
    await first.close()
    # The process died after the server applied it, before its outbox heard the ack.
    FileStore(path).put({"id": ack["id"], "t": "room.post", "d": {"room": "lobby", "body": "once"}, "order": 1})
    events = []
    second = await clients(server.url, session=session, store=FileStore(path), on_event=events.append)
    await second.join("lobby")
    assert await second.settled(30)
    replayed = next(e for e in events if e["t"] == "ack")
    assert replayed["id"] == ack["id"] and replayed["dup"] is True and replayed["d"] == ack["d"]
    assert await sync_to_async(stored)("lobby") == [(1, "once")]


async def test_the_example_bot_answers_each_message_once_across_its_own_restarts(start_daphne, clients, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from tests.support.servers import ROOT

    server = start_daphne()
    ana = await clients(server.url, session=await asign_in(server.url, "ana"))
    await ana.join("lobby")

    def start_bot() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "examples/bot.py", server.url, "--room", "lobby", "--state", str(tmp_path / "bot")],
            cwd=ROOT,
            env=os.environ,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    async def replies(count: int) -> list[str]:
        while True:
            bodies = [m["body"] for m in ana.messages("lobby") if not m["body"].startswith("!echo")]
            if len(bodies) >= count:
                return bodies
            await asyncio.sleep(0.05)

    bot = start_bot()
    try:
        await ana.post("lobby", "!echo one")
        assert await asyncio.wait_for(replies(1), 60) == ["one"]
        bot.send_signal(signal.SIGKILL)
        bot.wait()
        await ana.post("lobby", "!echo two")  # posted while the bot is down
        bot = start_bot()  # reads the room's last messages again, "one" included
        assert await asyncio.wait_for(replies(2), 60) == ["one", "two"]
        await ana.post("lobby", "!echo three")
        assert await asyncio.wait_for(replies(3), 60) == ["one", "two", "three"]
        await asyncio.sleep(1)  # time enough for a second answer to show, if there were one
        assert [m["body"] for m in ana.messages("lobby")] == [
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
