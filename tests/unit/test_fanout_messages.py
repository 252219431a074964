"""The hub's Pub/Sub messages: a room's frames, or a user's, in order, packed into one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from messaging.transport.packing import pack, pack_for_user, unpack, unpack_for_user

frames = st.lists(st.tuples(st.none() | st.integers(min_value=0, max_value=2**63 - 1), st.text()), max_size=20)


@given(frames)
def test_packed_frames_unpack_to_themselves_in_order(given_frames):
    assert list(unpack(pack(given_frames))) == given_frames


def test_a_frame_may_hold_newlines_spaces_and_any_text():
    packed = [(1, "a\nb c"), (None, ""), (2, "😀 \n\n 9 9\n")]
    assert list(unpack(pack(packed))) == packed


@pytest.mark.parametrize(
    "data",
    [
        b"1 5\nabc",  # runs past the end
        b"1 -2\nab",  # a negative length (would read backwards)
        b"1\nabc",  # no length
        b"x 3\nabc",  # not a seq
        b"1 3\nabc2 1\n",  # a second frame cut short
        b"1 2\n\xff\xfe",  # not UTF-8
        b"plain text",  # the old one-frame format
    ],
)
def test_anything_else_is_refused(data):
    with pytest.raises(ValueError):
        list(unpack(data))


rooms = st.none() | st.from_regex(r"[a-z0-9][a-z0-9-]{0,63}", fullmatch=True)
user_frames = st.lists(st.tuples(rooms, st.text()), max_size=20)


@given(user_frames)
def test_a_users_packed_frames_unpack_to_themselves_in_order(given_frames):
    assert list(unpack_for_user(pack_for_user(given_frames))) == given_frames


def test_a_users_frame_is_for_a_room_or_for_all_its_sockets():
    packed = [("lobby", "a\nb c"), (None, ""), ("a-9", " \n")]
    assert list(unpack_for_user(pack_for_user(packed))) == packed


@pytest.mark.parametrize(
    "data",
    [
        b"Lobby 2\nhi",  # not a slug
        b"-lobby 2\nhi",  # nor this
        b"lobby 5\nabc",  # runs past the end
        b"lobby\nabc",  # no length
        b"lobby 2\n\xff\xfe",  # not UTF-8
    ],
)
def test_anything_else_for_a_user_is_refused(data):
    with pytest.raises(ValueError):
        list(unpack_for_user(data))
