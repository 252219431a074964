"""The rate limiters' arithmetic, on a clock the test moves."""

from __future__ import annotations

import pytest

from messaging.transport.ratelimit import LocalWindow, TokenBucket


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_bucket_allows_the_burst_then_one_per_refill():
    clock = Clock()
    bucket = TokenBucket(rate=4, burst=3, clock=clock)
    assert [bucket.take() for _ in range(3)] == [0, 0, 0]
    assert bucket.take() == pytest.approx(0.25)
    clock.now += 0.25
    assert bucket.take() == 0
    assert bucket.take() == pytest.approx(0.25)


def test_bucket_never_holds_more_than_the_burst():
    clock = Clock()
    bucket = TokenBucket(rate=10, burst=2, clock=clock)
    clock.now += 3600
    assert [bucket.take() for _ in range(3)][-1] > 0


def test_a_charge_for_work_done_goes_below_zero_and_the_next_command_waits_for_it():
    clock = Clock()
    bucket = TokenBucket(rate=10, burst=100, clock=clock)
    assert bucket.take() == 0
    bucket.charge(150.5)  # a join's backlog: 99 tokens were left
    assert bucket.take() == pytest.approx((1 + 51.5) / 10)
    clock.now += 5.25
    assert bucket.take() == 0


def test_window_counts_per_key_and_restarts_at_the_boundary():
    clock = Clock(100.0)
    window = LocalWindow(limit=2, window=10, clock=clock)
    assert [window.hit("a"), window.hit("a"), window.hit("b")] == [0, 0, 0]
    assert window.hit("a") == pytest.approx(10.0)  # until 110
    clock.now = 109.5
    assert window.hit("a") == pytest.approx(0.5)
    clock.now = 110.0
    assert window.hit("a") == 0


@pytest.mark.parametrize("make", [lambda: TokenBucket(rate=0, burst=1), lambda: LocalWindow(limit=0, window=1)])
def test_limits_that_would_refuse_everything_are_a_config_error(make):
    with pytest.raises(ValueError):
        make()


def test_a_window_holds_at_most_its_keys_forgetting_those_hit_longest_ago():
    clock = Clock(100.0)
    window = LocalWindow(limit=2, window=10, clock=clock, max_keys=100)
    for _ in range(3):
        window.hit("flooder")
    # A flood of new keys in the same window: memory stays bounded...
    for n in range(1000):
        window.hit(f"address-{n}")
        window.hit("flooder")  # ...and a key that keeps hitting stays counted
        assert len(window.counts) <= 100
    assert window.hit("flooder") > 0
    # Keys of an earlier window go first.
    clock.now = 200.0
    window.hit("later")
    assert len(window.counts) <= 100


async def test_a_local_window_hit_now_is_its_hit():
    window = LocalWindow(limit=1, window=10, clock=Clock())
    assert await window.ahit_now("a") == 0 and await window.ahit_now("a") > 0 and window.hit("a") > 0
