"""The hub's Pub/Sub message: a room's frames, in order, packed into one."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from messaging.fanout import pack, unpack

frames = st.lists(st.tuples(st.none() | st.integers(min_value=0, max_value=2**63 - 1), st.text()), max_size=20)


@given(frames)
def test_packed_frames_unpack_to_themselves_in_order(given_frames):
    assert list(unpack(pack(given_frames))) == given_frames


def test_a_frame_may_hold_newlines_spaces_and_any_text():
    packed = [(1, "a\nb c"), (None, ""), (2, "😀 \n\n 9 9\n")]
    assert list(unpack(pack(packed))) == packed


@pytest.mark.parametrize("data", [
    b"1 5\nabc",          # runs past the end
    b"1 -2\nab",          # a negative length (would read backwards)
    b"1\nabc",            # no length
    b"x 3\nabc",          # not a seq
    b"1 3\nabc2 1\n",     # a second frame cut short
    b"1 2\n\xff\xfe",     # not UTF-8
    b"plain text",        # the old one-frame format
])
def test_anything_else_is_refused(data):
    with pytest.raises(ValueError):
        list(unpack(data))
