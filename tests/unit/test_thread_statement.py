"""The posts' statement with and without its parts for replies (messaging/chat/threads.py): a batch without
replies runs the statement as it was before threads, with no CTE, join or row of theirs."""

from __future__ import annotations

from messaging.chat.posts import POSTS_AND_RECORDS
from messaging.chat.threads import with_or_without_threads

THREAD_PARTS = (
    "rootless",
    "replied",
    "threaded",
    "{thread_replies}",
    "{thread_joins}",
    "{thread_events}",
    "-- threads",
)


def test_a_batch_without_replies_gets_none_of_their_parts():
    plain = with_or_without_threads(POSTS_AND_RECORDS, False)
    assert [part for part in THREAD_PARTS if part in plain] == []
    assert "SELECT p.n, p.seq, s.at_text, p.rev, NULL, NULL, NULL::bigint\nFROM post p, stamp s" in plain


def test_a_batch_with_replies_gets_all_of_them_without_their_marks():
    full = with_or_without_threads(POSTS_AND_RECORDS, True)
    for part in (
        "rootless AS MATERIALIZED",
        "replied AS (",
        "threaded AS (",
        "LEFT JOIN replied x",
        "h.replies - x.later",
    ):
        assert part in full
    assert "threads:" not in full and "-- threads" not in full and "{thread_replies}" not in full
    assert "{thread_events}" in full  # the events' part, with the outbox on (messaging/chat/posts.py)
