"""Pages that fit in a frame (PROTOCOL 1.2) with the real consumer, PostgreSQL and Redis:
`room.history` holds the newest messages that fit, and the member lists of a
join ack and of `room.members` the members that do; paging on gets the rest.

Messages and names of control characters are the costliest to send: six
bytes of JSON each (`"\\u0001"`), 24 KB for a message of 4,000.
"""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from messaging.conf import get_settings

from ..support.noisy import BODY_CHARS, CONTROL, noisy_members, noisy_room

pytestmark = [pytest.mark.django_db(transaction=True)]

SMALL_FRAMES = 40_000


async def sized_answer(client, t: str, d: dict) -> tuple[dict, int]:
    """The ack of one command and the bytes of its frame; fails at once on an error frame naming it."""
    id = await client.send(t, d)
    while True:
        frame, size = await client.receive_sized(15)
        if frame.get("id") == id or frame.get("error", {}).get("id") == id:
            assert frame["t"] == "ack", frame["error"] if frame["t"] == "error" else frame
            return frame, size
        client.inbox.append(frame)


async def scroll_back(client, room: str, before: int, limit: int = 100) -> list[list[dict]]:
    """Every page of `room.history` from `before` down to the first message, each an ok ack within the frame."""
    pages = []
    while True:
        ack, size = await sized_answer(client, "room.history", {"room": room, "before": before, "limit": limit})
        assert ack["ok"], ack
        assert size <= get_settings().largest_frame
        messages = ack["d"]["messages"]
        assert messages or not ack["d"]["more"], "a page that says more holds something to go on from"
        pages.append(messages)
        if not ack["d"]["more"]:
            return pages
        before = messages[0]["seq"]


@pytest.mark.parametrize("count", [50, 100])
async def test_history_of_control_characters_pages_within_the_frame_and_gets_every_message_once(
    count, make_user, open_clients
):
    await database_sync_to_async(noisy_room)("noisy", count)
    ana = await open_clients(await make_user("ana"))
    await ana.join("noisy", since=count)
    pages = await scroll_back(ana, "noisy", count + 1)
    assert len(pages[0]) < min(count, 100), "the first page is cut short: all would not fit"
    seqs = [m["seq"] for page in reversed(pages) for m in page]
    assert seqs == list(range(1, count + 1)), "every message, once, in order"
    assert all(m["body"] == CONTROL * BODY_CHARS for page in pages for m in page)


async def test_a_short_page_of_history_still_sends_its_messages_counts(make_user, open_clients):
    await database_sync_to_async(noisy_room)("noisy", 60)
    ana = await open_clients(await make_user("ana"))
    await ana.join("noisy", since=60)
    for seq in (60, 59, 1):
        assert (await ana.call("reaction.add", {"room": "noisy", "seq": seq}))["ok"]
    await ana.frames("reaction", 3)  # the room's own, live
    ack, _ = await sized_answer(ana, "room.history", {"room": "noisy", "before": 61, "limit": 100})
    kept = {m["seq"] for m in ack["d"]["messages"]}
    assert 1 not in kept and ack["d"]["more"] is True
    counts = await ana.frames("reaction", 2)
    assert sorted(f["d"]["seq"] for f in counts) == [59, 60], "the counts of the page's messages, no more"


async def test_a_join_ack_holds_the_members_that_fit_and_its_own_entry(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "MAX_SEND_BUFFER": SMALL_FRAMES}
    crowd = await database_sync_to_async(noisy_members)("crowd", 100)
    ana = await make_user("ana")
    client = await open_clients(ana)
    ack, size = await sized_answer(client, "room.join", {"room": "crowd"})
    assert ack["ok"] and size <= SMALL_FRAMES
    members = ack["d"]["members"]
    assert 1 < len(members) < 100 and ack["d"]["members_total"] == 101
    assert [m["user"] for m in members[:-1]] == crowd[: len(members) - 1], "the first ones, in order"
    assert members[-1]["user"] == ana.pk, "the joining member's own entry, in its place at the end"
    # room.members pages through them all, each page within the frame.
    seen, after = [], None
    while True:
        page, size = await sized_answer(
            client, "room.members", {"room": "crowd", **({"after": after} if after else {})}
        )
        assert page["ok"] and size <= SMALL_FRAMES and page["d"]["members"]
        seen += [m["user"] for m in page["d"]["members"]]
        if not page["d"]["more"]:
            break
        after = seen[-1]
    assert seen == [*crowd, ana.pk]
