"""The client library's pure parts: the outbox's bookkeeping and a room's resume point."""

from __future__ import annotations

import json

import pytest

from messaging_client import LANES, FileStore, MemoryStore, Outbox, OutboxFull, RoomView, served_lanes


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def outbox(store=None, **options) -> tuple[Outbox, Clock]:
    clock = Clock()
    return Outbox(store, clock=clock, rand=lambda: 0.5, **options), clock


def ids(entries) -> list[str]:
    return [e.id for e in entries]


def test_a_rooms_posts_go_one_at_a_time_and_other_commands_at_once():
    box, _ = outbox()
    a1 = box.add("room.post", {"room": "a", "body": "1"})
    a2 = box.add("room.post", {"room": "a", "body": "2"})
    b1 = box.add("room.post", {"room": "b", "body": "1"})
    r1 = box.add("reaction.add", {"room": "a", "seq": 1})
    r2 = box.add("reaction.add", {"room": "a", "seq": 1})
    assert ids(box.due()) == [a1.id, b1.id, r1.id, r2.id]
    for entry in list(box.due()):
        box.sent(entry)
    assert ids(box.due()) == []  # all in flight
    box.settle(a1.id)
    assert ids(box.due()) == [a2.id]


def test_an_edit_or_delete_waits_behind_what_its_room_sent_before():
    box, _ = outbox()
    post = box.add("room.post", {"room": "a", "body": "1"})
    edit = box.add("message.edit", {"room": "a", "seq": 1, "body": "2"})
    delete = box.add("message.delete", {"room": "a", "seq": 1})
    assert ids(box.due()) == [post.id]
    box.settle(post.id)
    assert ids(box.due()) == [edit.id]
    box.settle(edit.id)
    assert ids(box.due()) == [delete.id]


def test_a_type_the_server_gives_a_room_lane_waits_behind_its_rooms_posts():
    box, _ = outbox(lanes={**LANES, "poll.vote": "room"})
    post = box.add("room.post", {"room": "a", "body": "1"})
    vote = box.add("poll.vote", {"room": "a", "choice": 2})
    assert ids(box.due()) == [post.id]
    box.settle(post.id)
    assert ids(box.due()) == [vote.id]


def test_lanes_of_a_server_that_cannot_be_reached_are_the_built_in_ones():
    # Port 9 (discard) on loopback: refused at once.
    assert served_lanes("http://127.0.0.1:9", timeout=2) is LANES


def test_an_overdue_ack_sends_the_same_id_again_and_a_disconnect_makes_everything_due():
    box, clock = outbox(ack_timeout=5)
    entry = box.add("room.post", {"room": "a", "body": "1"})
    box.sent(entry)
    clock.now += 4.9
    assert ids(box.due()) == []
    clock.now += 0.2
    assert ids(box.due()) == [entry.id]
    box.sent(entry)
    box.disconnected()
    assert ids(box.due()) == [entry.id]
    assert entry.attempts == 2


def test_a_retryable_refusal_waits_at_least_retry_after_with_jitter_growing():
    box, clock = outbox(backoff_base=1, backoff_cap=8)
    entry = box.add("room.post", {"room": "a", "body": "1"})
    box.sent(entry)
    box.retry_later(entry.id, 3.0)
    assert box.next_wakeup() == pytest.approx(clock.now + 3.0)
    for _ in range(5):
        box.sent(entry)
    box.retry_later(entry.id, None)  # attempt 6: jitter 0.5 * min(8, 1 * 2**5)
    assert box.next_wakeup() == pytest.approx(clock.now + 4.0)


def test_a_deterministic_id_already_pending_is_the_same_action():
    box, _ = outbox()
    first = box.add("room.post", {"room": "a", "body": "pong"}, id="reply-a-7")
    again = box.add("room.post", {"room": "a", "body": "pong"}, id="reply-a-7")
    assert first is again and len(box) == 1


def test_the_outbox_is_bounded():
    box, _ = outbox(limit=2)
    box.add("room.post", {"room": "a", "body": "1"})
    box.add("room.post", {"room": "a", "body": "2"})
    with pytest.raises(OutboxFull):
        box.add("room.post", {"room": "a", "body": "3"})


def test_a_file_store_survives_the_process_in_order(tmp_path):
    path = tmp_path / "outbox.json"
    box, _ = outbox(FileStore(path))
    first = box.add("room.post", {"room": "a", "body": "1"})
    second = box.add("room.post", {"room": "a", "body": "2"})
    third = box.add("room.post", {"room": "a", "body": "3"})
    box.settle(second.id)
    again, _ = outbox(FileStore(path))
    assert ids(again.pending()) == [first.id, third.id]
    assert [e.d["body"] for e in again.pending()] == ["1", "3"]
    # Written whole each time: never a half-written file, no temporary left behind.
    assert json.loads(path.read_text())[0]["id"] == first.id
    assert [p.name for p in tmp_path.iterdir()] == ["outbox.json"]


def test_a_memory_store_forgets_with_the_process():
    store = MemoryStore()
    box, _ = outbox(store)
    box.add("room.post", {"room": "a", "body": "1"})
    assert len(Outbox(MemoryStore())) == 0 and len(Outbox(store)) == 1


def msg(seq: int, **extra) -> dict:
    return {"room": "a", "seq": seq, "id": f"m{seq}", "body": f"b{seq}", "version": 1, **extra}


def test_messages_are_taken_once_in_seq_order_and_a_gap_is_held():
    view = RoomView("a")
    assert view.join_data() == {"room": "a"}
    assert [d["seq"] for d in view.take(msg(4))] == [4]  # the backlog starts here
    assert view.take(msg(4)) == []  # a repeat
    assert view.take(msg(6)) == [] and view.behind()  # past a gap
    assert view.join_data() == {"room": "a", "since": 4}
    assert [d["seq"] for d in view.take(msg(5))] == [5, 6]
    assert not view.behind() and view.shown == 6


def test_a_replay_cut_short_leaves_the_view_behind_the_join_ack():
    view = RoomView("a")
    view.joined({"room": "a", "last_seq": 0})
    assert view.shown == 0 and not view.behind()
    view.joined({"room": "a", "last_seq": 9})
    for seq in range(1, 6):
        view.take(msg(seq))
    assert view.behind() and view.join_data() == {"room": "a", "since": 5}


def test_the_view_keeps_only_the_newest_messages_and_applies_newer_versions_only():
    view = RoomView("a", keep=3)
    for seq in range(1, 6):
        view.take(msg(seq))
    assert list(view.messages) == [3, 4, 5]
    assert view.changed({"room": "a", "seq": 4, "version": 2, "body": "edited", "rev": 9})["body"] == "edited"
    assert view.changed({"room": "a", "seq": 4, "version": 2, "body": "older"}) is None
    deleted = view.changed({"room": "a", "seq": 4, "version": 3, "deleted_at": "t"})
    assert deleted["deleted"] is True and deleted["body"] == ""
    assert view.changed({"room": "a", "seq": 1, "version": 5, "body": "gone"}) is None


def test_the_client_imports_nothing_of_the_app_nor_django():
    import subprocess
    import sys
    from pathlib import Path

    # Run from the repository's root, where `messaging` would import if anything asked for it.
    code = "import sys, messaging_client; print(sorted({m.split('.')[0] for m in sys.modules} & {'messaging', 'django', 'channels'}))"
    root = Path(__file__).resolve().parents[3]
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=root,
        env={"PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert result.stdout.strip() == "[]"
