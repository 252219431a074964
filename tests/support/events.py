"""Helpers of the events' tests: effects in bulk, the relay and consumers as real processes, the stream read back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import orjson

from .servers import ROOT


def post_many(user, rooms: list[str], count: int, body: str = "m") -> None:
    """`count` posts per room by `user` (a member), through the posts' batch statement, 50 at a time
    (the statement `posts_and_records` sends through the gateway, on this thread's connection)."""
    from messaging.chat.posts import Post, posts_results, posts_statement
    from messaging.core.gateway import fetch_on_this_thread
    from messaging.core.handlers import CommandContext

    entries = [
        (CommandContext(user=user, command_id=uuid.uuid4().hex, type="room.post"), Post(room, f"{body}{n}"), "f")
        for n in range(count)
        for room in rooms
    ]
    for start in range(0, len(entries), 50):
        batch = entries[start : start + 50]
        results = posts_results(batch, fetch_on_this_thread(*posts_statement(batch)))
        assert all(isinstance(r, dict) for r in results), results


def join_rooms(user, rooms: list[str]) -> None:
    from messaging.models import Membership, Room

    for slug in rooms:
        room, _ = Room.objects.get_or_create(slug=slug)
        Membership.objects.get_or_create(room=room, user=user)


class Process:
    """A `manage.py` command of the demo project as a process of its own, its output in a log file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log_path = log
        self.log = open(log, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


def stream_entries(client, stream: str = "messaging:events") -> list[dict]:
    """Every entry of the stream, oldest first, with `data` decoded."""
    entries = []
    for _, fields in client.xrange(stream):
        fields = {k.decode(): v.decode() for k, v in fields.items()}
        fields["data"] = orjson.loads(fields["data"])
        entries.append(fields)
    return entries


def check_order_and_completeness(entries: list[dict], expected: dict[str, dict]) -> int:
    """Assert the entries hold every expected event (by id), each republish identical to the first,
    and each room's events first seen in their order; returns how many were published more than once."""
    first: dict[str, dict] = {}
    per_room: dict[str, list[int]] = {}
    repeats = 0
    for e in entries:
        if e["event_id"] in first:
            assert e == first[e["event_id"]], "a republished event must be identical"
            repeats += 1
            continue
        first[e["event_id"]] = e
        per_room.setdefault(e["room"], []).append(expected[e["event_id"]]["position"])
    assert set(first) == set(expected), f"{len(set(expected) - set(first))} events missing"
    for room, positions in per_room.items():
        assert positions == sorted(positions), f"room {room} out of order"
    for event_id, e in first.items():
        assert e["data"] == expected[event_id]["data"] and e["type"] == expected[event_id]["type"]
    return repeats


def outbox_by_id() -> dict[str, dict]:
    from messaging.events.models import Event

    return {str(e["event_id"]): e for e in Event.objects.values("event_id", "type", "room", "position", "data")}


def publish_outbox(redis_url: str, stream: str = "messaging:events") -> None:
    """Publish every unpublished event to the Redis stream with a relay run in this process."""
    import asyncio

    from messaging.events.models import Event
    from messaging.events.redis_streams import RedisStreamSink
    from messaging.events.relay import Relay
    from messaging.events.settings import connection_params

    async def drain() -> None:
        relay = Relay(
            connection_params(),
            RedisStreamSink(redis_url, stream, 10_000),
            partitions=4,
            batch=500,
            poll_interval=0.05,
            retention=3600,
        )
        for _ in range(100):
            await relay.step()
        await relay.disconnect()
        await relay.sink.aclose()

    asyncio.run(drain())
    assert not Event.objects.filter(published_at__isnull=True).exists()
