"""Watermark arithmetic: forward only, read implies delivered, order does not matter."""

from __future__ import annotations

from functools import reduce

from hypothesis import given, settings
from hypothesis import strategies as st

from messaging.chat.receipts import Watermarks

seqs = st.none() | st.integers(min_value=0, max_value=1000)
receipts = st.lists(st.tuples(seqs, seqs), max_size=20)
# The machine is shared: a slow example is not a failure.
untimed = settings(deadline=None)


def test_lower_values_change_nothing():
    assert Watermarks(5, 3).forward(2, 1) == Watermarks(5, 3)


def test_read_implies_delivered():
    assert Watermarks(0, 0).forward(None, 7) == Watermarks(7, 7)
    assert Watermarks(4, 2).forward(3, 6) == Watermarks(6, 6)


def test_missing_values_keep_their_watermark():
    assert Watermarks(5, 3).forward(None, None) == Watermarks(5, 3)
    assert Watermarks(5, 3).forward(9, None) == Watermarks(9, 3)


@untimed
@given(receipts, st.randoms())
def test_any_order_and_repetition_equals_the_maxima_once(given_receipts, random):
    shuffled = given_receipts * 2
    random.shuffle(shuffled)
    folded = reduce(lambda marks, r: marks.forward(*r), shuffled, Watermarks(0, 0))
    delivered = max((d for d, _ in given_receipts if d is not None), default=None)
    read = max((r for _, r in given_receipts if r is not None), default=None)
    assert folded == Watermarks(0, 0).forward(delivered, read)
    assert folded.read <= folded.delivered


@untimed
@given(st.integers(0, 1000), st.integers(0, 1000), seqs, seqs)
def test_never_moves_back(delivered, read, new_delivered, new_read):
    old = Watermarks(max(delivered, read), read)
    new = old.forward(new_delivered, new_read)
    assert new.delivered >= old.delivered and new.read >= old.read and new.read <= new.delivered
