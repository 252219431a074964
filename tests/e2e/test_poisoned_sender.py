"""One user's malformed posts never fail another user's (issue 19, finding 3), on real daphne.

A post whose `d` is nested 300 levels deep used to fail the whole batch it
shared with other users' posts: its fingerprint was first computed inside
the batch, and orjson cannot write more than 254 levels (it reads 1,024).
59 of 240 other users' posts came back `unavailable`, each with an ERROR
traceback in the server's log.
"""

from __future__ import annotations

import asyncio
import signal
import uuid

import pytest
from asgiref.sync import sync_to_async

from messaging.models import CommandRecord, Message
from messaging.testing import SocketClient
from messaging_client import sign_in

pytestmark = [pytest.mark.e2e]

USERS = 240
ROOMS = 8
POISONED_POSTS = 40


def nested(levels: int) -> object:
    value: object = "deep"
    for _ in range(levels):
        value = [value]
    return value


async def sign_in_all(url: str, count: int) -> list[str]:
    async def one(n: int) -> str:
        return await sync_to_async(sign_in, thread_sensitive=False)(url, f"good{n}")

    sessions: list[str] = []
    for start in range(0, count, 20):
        sessions += await asyncio.gather(*(one(n) for n in range(start, min(count, start + 20))))
    return sessions


async def test_a_poisoned_sender_fails_nobody_else(start_daphne):
    server = start_daphne()
    good = [await SocketClient(server.url, session).connect() for session in await sign_in_all(server.url, USERS)]
    poisoned = await SocketClient(server.url, await sync_to_async(sign_in)(server.url, "poisoned")).connect()
    try:
        joins = await asyncio.gather(
            *(ws.call("room.join", {"room": f"room-{n % ROOMS}"}) for n, ws in enumerate([*good, poisoned]))
        )
        assert all(ack["ok"] for ack in joins)
        # Every post reaches the server's socket buffers while it is stopped,
        # the poisoned ones between the others: woken, it reads them together
        # and its batches mix them, as a busy server's do.
        junk = nested(300)
        server.signal(signal.SIGSTOP)
        good_ids = [uuid.uuid4().hex for _ in good]
        poison_ids = []
        for n, (ws, id) in enumerate(zip(good, good_ids)):
            await ws.send("room.post", {"room": f"room-{n % ROOMS}", "body": f"hello from {n}"}, id=id)
            if n % (USERS // POISONED_POSTS) == 0:
                poison_ids.append(await poisoned.send("room.post", {"room": "room-0", "body": "poison", "junk": junk}))
        server.signal(signal.SIGCONT)
        acks = await asyncio.gather(*(ws.ack(id, timeout=60) for ws, id in zip(good, good_ids)))
        refusals = [await poisoned.ack(id, timeout=60) for id in poison_ids]
    finally:
        await asyncio.gather(*(ws.close() for ws in [*good, poisoned]))

    failed = [ack for ack in acks if not ack["ok"]]
    assert not failed, f"{len(failed)} of {USERS} good posts failed, e.g. {failed[0]}"
    assert {(r["ok"], r["error"]["code"]) for r in refusals} == {(False, "invalid")}
    stored = await sync_to_async(lambda: sorted(Message.objects.values_list("client_msg_id", flat=True)))()
    assert stored == sorted(good_ids)
    assert await sync_to_async(CommandRecord.objects.count)() == USERS
    log = server.log_path.read_text(errors="replace")
    assert " ERROR " not in log and "Traceback" not in log, log[-3000:]
