"""The history's own checks on hand-made histories: each flags what it must, and only that."""

from __future__ import annotations

from .history import History, LowerBounds


def ack(id: str, d: dict, dup: bool = False) -> dict:
    return {"t": "ack", "id": id, "ok": True, "dup": dup, "d": d}


def refusal(id: str, code: str) -> dict:
    return {"t": "ack", "id": id, "ok": False, "error": {"code": code, "message": "", "retry": True}}


def answered(history: History, id: str, frame: dict, socket: int = 1, kind: str = "send") -> None:
    """One attempt, sent and answered a moment later; the next one a moment after that."""
    attempt = history.sent(0, id, socket, kind)
    later(history, 0.1)
    history.answered(attempt, frame)
    later(history, 0.1)


def later(history: History, seconds: float) -> None:
    history.t0 -= seconds  # the history's clock moves on


def test_in_progress_after_an_answered_failure_is_a_violation():
    history = History(seed=1)
    history.command(0, "a", "room.post", {"room": "r", "body": "x"})
    answered(history, "a", refusal("a", "unavailable"))
    answered(history, "a", refusal("a", "in_progress"), kind="resend")
    assert [v.kind for v in history.violations] == ["unexplained-in-progress"]


def test_in_progress_beside_an_unanswered_attempt_is_explained():
    history = History(seed=1)
    history.command(0, "a", "room.post", {"room": "r", "body": "x"})
    history.sent(0, "a", 1, "send")  # its socket was cut: never answered
    answered(history, "a", refusal("a", "in_progress"), socket=2, kind="resend")
    assert history.violations == []


def test_in_progress_while_redis_was_in_trouble_is_explained():
    history = History(seed=1)
    history.command(0, "a", "room.post", {"room": "r", "body": "x"})
    answered(history, "a", refusal("a", "unavailable"))
    history.redis_slow(history.now() - 0.5, history.now())  # the release may not have reached Redis
    answered(history, "a", refusal("a", "in_progress"), kind="resend")
    assert history.violations == []


def test_a_duplicate_whose_ack_differs_and_a_second_first_ack_are_violations():
    history = History(seed=1)
    history.command(0, "a", "room.post", {"room": "r", "body": "x"})
    answered(history, "a", ack("a", {"room": "r", "seq": 1, "at": "t"}))
    answered(history, "a", ack("a", {"room": "r", "seq": 1, "at": "t"}, dup=True), kind="probe")
    assert history.violations == []
    answered(history, "a", ack("a", {"room": "r", "seq": 2, "at": "t"}, dup=True), kind="probe")
    answered(history, "a", ack("a", {"room": "r", "seq": 1, "at": "t"}), kind="probe")
    assert [v.kind for v in history.violations] == ["acks-differ", "applied-twice"]


def test_a_counter_applied_below_what_was_seen_before_its_send_is_a_violation():
    history = History(seed=1)
    history.command(0, "a", "wallet.add", {"wallet": "w1", "amount": 3})
    history.command(0, "b", "wallet.add", {"wallet": "w1", "amount": 3})
    answered(history, "a", ack("a", {"wallet": "w1", "balance": 10}))
    # Sent after 10 was seen: applying it must give at least 13.
    answered(history, "b", ack("b", {"wallet": "w1", "balance": 12}))
    assert [v.kind for v in history.violations] == ["counter-backwards"]


def test_watermarks_read_after_a_higher_one_was_seen_are_a_violation():
    history = History(seed=1)
    history.watermarks_seen("r", 5, 7, 4)  # a status frame
    later(history, 1)
    history.watermarks_seen("r", 5, 7, 4, asked=history.now())  # a join sent after it
    assert history.violations == []
    history.watermarks_seen("r", 5, 6, 4, asked=history.now())
    assert [v.kind for v in history.violations] == ["watermark-backwards"]


def test_lower_bounds_keep_the_highest_value_seen_before_a_time():
    bounds = LowerBounds()
    bounds.observe("k", 1.0, 3)
    bounds.observe("k", 2.0, 2)  # lower: changes nothing
    bounds.observe("k", 3.0, 5)
    assert [bounds.before("k", t) for t in (0.5, 1.0, 1.5, 3.0, 3.5)] == [None, None, 3, 3, 5]
