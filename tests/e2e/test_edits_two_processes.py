"""Edits and deletes across two daphne processes sharing PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from asgiref.sync import sync_to_async

from messaging.models import CommandRecord, Message, MessageVersion, Room
from messaging.testing import SocketClient
from messaging_client import sign_in

pytestmark = [pytest.mark.e2e]


async def frames_of(ws: SocketClient, kind: str, count: int) -> list[dict]:
    found = [f for f in ws.inbox if f.get("t") == kind]
    ws.inbox = [f for f in ws.inbox if f.get("t") != kind]
    while len(found) < count:
        frame = await ws.receive(timeout=15)
        if frame.get("t") == kind:
            found.append(frame)
    return found


async def test_copies_of_an_edit_and_a_delete_on_two_processes_apply_once_and_reach_both(start_daphne):
    a, b = start_daphne(), start_daphne()
    session = await sync_to_async(sign_in)(a.url, "ana")
    sockets = [await SocketClient(server.url, session).connect() for server in (a, b, a, b)]
    watcher = await SocketClient(b.url, await sync_to_async(sign_in)(b.url, "bob")).connect()
    try:
        for ws in (*sockets, watcher):
            assert (await ws.call("room.join", {"room": "lobby"}))["ok"]
        seq = (await sockets[0].call("room.post", {"room": "lobby", "body": "draft"}))["d"]["seq"]
        for t, d in (
            ("message.edit", {"room": "lobby", "seq": seq, "body": "final"}),
            ("message.delete", {"room": "lobby", "seq": seq}),
        ):
            id = uuid.uuid4().hex
            await asyncio.gather(*(ws.send(t, d, id=id) for ws in sockets))
            acks = await asyncio.gather(*(ws.ack(id) for ws in sockets))
            assert all(ack["ok"] for ack in acks), acks
            assert sorted(ack["dup"] for ack in acks) == [False, True, True, True]
            assert len({str(ack["d"]) for ack in acks}) == 1
        edit, delete = (await frames_of(watcher, "msg.edit", 1))[0], (await frames_of(watcher, "msg.delete", 1))[0]
        assert (edit["d"]["version"], edit["d"]["rev"], edit["d"]["body"]) == (2, 2, "final")
        assert (delete["d"]["version"], delete["d"]["rev"]) == (3, 3)
    finally:
        for ws in (*sockets, watcher):
            await ws.close()

    message = await sync_to_async(lambda: Message.objects.values("body", "version", "rev").get())()
    assert message == {"body": "", "version": 3, "rev": 3}
    assert await sync_to_async(lambda: Room.objects.get(slug="lobby").last_rev)() == 3
    assert await sync_to_async(MessageVersion.objects.count)() == 2
    assert await sync_to_async(CommandRecord.objects.filter(type__startswith="message.").count)() == 2
