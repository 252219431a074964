"""A session's frames as server-sent events (messaging/transport/events.py): the cursor, the hold before `ready`."""

from __future__ import annotations

import json

from messaging.transport.events import EventBuffer, encode_cursor, read_cursor
from messaging.transport.servers.asgi import SendBuffer

ROOMS = ["lobby", "dev"]


def test_a_cursor_reads_back_as_its_revs_and_only_for_its_rooms():
    cursor = encode_cursor(ROOMS, [12, 0])
    assert cursor.endswith(".c.0")
    assert read_cursor(ROOMS, cursor) == [12, 0]
    for other in (["dev", "lobby"], ["lobby"], ["lobby", "dev", "ops"]):
        assert read_cursor(other, cursor) is None
    tag = cursor.split(".")[0]
    for bad in ("", "nonsense", f"{tag}.c", f"{tag}.c.0.1", f"{tag}.c.-1", f"{tag}.c.!", f"{tag}." + "z" * 400):
        assert read_cursor(ROOMS, bad) is None, bad


async def drop(message):
    pass


def frame(t: str, **d) -> str:
    return json.dumps({"t": t, "d": d})


async def test_acks_stay_off_the_stream_and_frames_move_the_cursor():
    overflows = []
    inner = SendBuffer(drop, 100_000, lambda frames, waited: overflows.append((frames, waited)))
    buffer = EventBuffer(inner, ROOMS, [0, 0])
    buffer.expected = {"j1": "lobby"}
    assert buffer.send(json.dumps({"t": "ack", "id": "j1", "ok": True, "d": {"room": "lobby", "last_rev": 7}}))
    assert buffer.acked.is_set() and buffer.cursor == encode_cursor(ROOMS, [7, 0])
    assert buffer.send(json.dumps({"t": "ack", "id": "other", "ok": True, "d": {}}))
    assert buffer.send(frame("msg", room="dev", seq=1, rev=3))
    assert buffer.send(frame("typing", room="dev", user=1))
    assert buffer.held == [
        f"event: msg\ndata: {frame('msg', room='dev', seq=1, rev=3)}\nid: {encode_cursor(ROOMS, [7, 3])}\n\n",
        f"event: typing\ndata: {frame('typing', room='dev', user=1)}\nid: {encode_cursor(ROOMS, [7, 3])}\n\n",
    ]
    buffer.ready('{"rooms": []}')
    assert buffer.held is None and [text.split("\n")[0] for text, _ in inner.queue] == [
        "event: ready",
        "event: msg",
        "event: typing",
    ]
    assert overflows == []


async def test_what_the_joins_send_past_max_send_buffer_a_room_before_ready_overflows_the_stream():
    overflows = []
    inner = SendBuffer(drop, 4000, lambda frames, waited: overflows.append((frames, waited)))
    buffer = EventBuffer(inner, ROOMS, [0, 0])
    body = "x" * 500
    sent = 0
    while not overflows:
        assert sent < 100
        assert buffer.send(frame("msg", room="lobby", seq=sent + 1, rev=sent + 1, body=body))
        sent += 1
    [(frames, waited)] = overflows
    assert frames == sent and waited > 2 * 4000
    assert buffer.overflowed and buffer.held is None
    # Dropped from now on, never held.
    assert buffer.send(frame("msg", room="lobby", seq=sent + 1, rev=sent + 1, body=body))
    assert inner.queue == () or len(inner.queue) == 0
