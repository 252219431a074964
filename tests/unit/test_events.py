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


def ack(id: str, **d) -> str:
    return json.dumps({"t": "ack", "id": id, "ok": True, "d": d})


def lines(inner: SendBuffer, field: str) -> list[str]:
    return [line for text, _ in inner.queue for line in text.split("\n") if line.startswith(field)]


async def test_acks_stay_off_the_stream_and_a_join_moves_the_cursor_once_its_backlog_is_put():
    overflows = []
    inner = SendBuffer(drop, 100_000, lambda frames, waited: overflows.append((frames, waited)))
    buffer = EventBuffer(inner, ROOMS, [2, 0])
    buffer.expected = {"j1": "lobby"}
    assert buffer.send(ack("j1", room="lobby", last_rev=7, rev_upto=7))
    assert buffer.acks["j1"]["d"]["last_rev"] == 7
    assert buffer.send(ack("other"))
    # The join's backlog: its frames do not move the cursor, its end does.
    assert buffer.send(frame("msg", room="lobby", seq=1, rev=6))
    assert buffer.cursor == encode_cursor(ROOMS, [2, 0])
    buffer.joined("lobby")
    assert buffer.cursor == encode_cursor(ROOMS, [7, 0])
    # A live frame moves it.
    assert buffer.send(frame("msg", room="dev", seq=1, rev=3))
    assert buffer.send(frame("typing", room="dev", user=1))
    assert [text for _, text in buffer.held] == [
        f"event: msg\ndata: {frame('msg', room='lobby', seq=1, rev=6)}\nid: {encode_cursor(ROOMS, [2, 0])}\n\n",
        f"event: msg\ndata: {frame('msg', room='dev', seq=1, rev=3)}\nid: {encode_cursor(ROOMS, [7, 3])}\n\n",
        f"event: typing\ndata: {frame('typing', room='dev', user=1)}\nid: {encode_cursor(ROOMS, [7, 3])}\n\n",
    ]
    buffer.ready('{"rooms": []}')
    # `ready` goes first, with the cursor the stream started from: nothing after it is sent yet.
    assert buffer.held is None and lines(inner, "event:") == [
        "event: ready",
        "event: msg",
        "event: msg",
        "event: typing",
    ]
    assert lines(inner, "id:")[0] == f"id: {encode_cursor(ROOMS, [2, 0])}"
    assert overflows == [] and buffer.lagging() is None


async def test_a_replay_cut_short_leaves_its_room_behind_until_a_join_reaches_its_last_rev():
    inner = SendBuffer(drop, 100_000, lambda frames, waited: None)
    buffer = EventBuffer(inner, ROOMS, [10, 0])
    buffer.expected = {"j1": "lobby"}
    buffer.send(ack("j1", room="lobby", last_rev=50, rev_upto=20))
    assert buffer.send(frame("msg", room="lobby", seq=11, rev=20))
    buffer.joined("lobby")
    assert buffer.cursor == encode_cursor(ROOMS, [20, 0]) and buffer.lagging() == 0
    buffer.ready('{"rooms": []}')
    # Live frames past the replay's end are dropped, and never move the cursor: the next page sends them.
    buffer.send(frame("msg", room="lobby", seq=60, rev=51))
    buffer.send(frame("typing", room="lobby", user=2))
    assert lines(inner, "event:") == ["event: ready", "event: msg", "event: typing"]
    assert buffer.cursor == encode_cursor(ROOMS, [20, 0])
    buffer.expected = {"j2": "lobby"}
    buffer.send(ack("j2", room="lobby", last_rev=51, rev_upto=51))
    buffer.send(frame("msg", room="lobby", seq=60, rev=51))
    buffer.joined("lobby")
    assert buffer.lagging() is None and buffer.cursor == encode_cursor(ROOMS, [51, 0])
    buffer.send(frame("msg", room="lobby", seq=61, rev=52))
    assert lines(inner, "id:")[-1] == f"id: {encode_cursor(ROOMS, [52, 0])}"


async def test_a_room_whose_backlog_passes_max_send_buffer_before_ready_is_deferred_and_the_others_kept():
    overflows = []
    inner = SendBuffer(drop, 4000, lambda frames, waited: overflows.append((frames, waited)))
    buffer = EventBuffer(inner, ROOMS, None)
    body = "x" * 500
    buffer.expected = {"j1": "dev"}
    buffer.send(ack("j1", room="dev", last_rev=1, rev_upto=1))
    buffer.send(frame("msg", room="dev", seq=1, rev=1, body="hi"))
    buffer.joined("dev")
    buffer.expected = {"j2": "lobby"}
    buffer.send(ack("j2", room="lobby", last_rev=20, rev_upto=20))
    for seq in range(1, 21):
        assert buffer.send(frame("msg", room="lobby", seq=seq, rev=seq, body=body))
    buffer.joined("lobby")
    assert overflows == [] and buffer.lagging() == 0
    assert [n for n, _ in buffer.held] == [1] and buffer.held_bytes < 4000
    # Its cursor stays: the join after `ready` sends its backlog again, as fast as the client reads.
    assert buffer.cursor == encode_cursor(ROOMS, [0, 1])
    buffer.ready('{"rooms": []}')
    buffer.send(frame("msg", room="lobby", seq=21, rev=21, body=body))
    assert lines(inner, "event:") == ["event: ready", "event: msg"]
    buffer.expected = {"j3": "lobby"}
    buffer.send(ack("j3", room="lobby", last_rev=21, rev_upto=21))
    assert buffer.lagging() is None


async def test_held_frames_of_no_room_past_the_hold_overflow_the_stream():
    overflows = []
    inner = SendBuffer(drop, 4000, lambda frames, waited: overflows.append((frames, waited)))
    buffer = EventBuffer(inner, ROOMS, [0, 0])
    sent = 0
    while not overflows:
        assert sent < 100
        assert buffer.send(json.dumps({"t": "error", "d": {"message": "x" * 500}}))
        sent += 1
    [(frames, waited)] = overflows
    assert frames == sent and waited > 2 * 4000
    assert buffer.overflowed and buffer.held is None
    # Dropped from now on, never held.
    assert buffer.send(frame("msg", room="lobby", seq=1, rev=1))
    assert len(inner.queue) == 0


async def test_live_frames_of_a_joined_room_past_its_share_before_ready_overflow_the_stream():
    # Only a join's own backlog can be sent again later: a joined room's cursor has moved.
    overflows = []
    inner = SendBuffer(drop, 4000, lambda frames, waited: overflows.append((frames, waited)))
    buffer = EventBuffer(inner, ROOMS, [0, 0])
    buffer.expected = {"j1": "lobby"}
    buffer.send(ack("j1", room="lobby", last_rev=0, rev_upto=0))
    buffer.joined("lobby")
    rev = 0
    while not overflows:
        rev += 1
        assert rev < 100
        buffer.send(frame("msg", room="lobby", seq=rev, rev=rev, body="x" * 500))
    assert buffer.overflowed and buffer.lagging() is None
    [(frames, waited)] = overflows
    assert waited > 4000 and waited < 2 * 4000, "past its share, not the whole hold"
