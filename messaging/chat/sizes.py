"""What fits in one frame (PROTOCOL 1.2, "Pages that fit in a frame"): the answers that hold lists, sized to the frame.

Every transport sends a frame of up to `largest_frame` bytes
(`MAX_SEND_BUFFER`, messaging/conf.py). A `room.history` page holds the
newest of the messages asked for that fit in one (a `room.search` page
likewise); the member list of a join
ack or of a `room.members` page the first members that do (a join ack keeps
the joining member's own entry). Each is counted as its ack will be sent:
the ack's envelope with the command's id, its `d` as orjson writes it, and
what the transport adds (a member's `online`). A shorter list says so as any
short page does: `more` (a join ack: `members_total`).

The handler runs on a database thread, and counting must cost little beside
its query. Each entry is first bounded from the length of its text (a
character takes at most six bytes of JSON: a control character is written
`\\u00XX`) and the fixed form of its other fields; only a list whose bound
is over the frame is encoded, entry by entry, to keep all that truly fits.
So the common page is encoded once, by the transport.

A page always holds its first entry: a `room.history` page without its
newest message would leave the client nothing to ask `before` again, and its
scroll-back would stall there. `check_one_message_fits` (run as the app
starts) makes sure that one always fits: it refuses settings whose longest
message would not (`BODY_MAX_CHARS` of the worst characters, from a sender
whose display name is as long as Django's user model holds). A join's
backlog sends each message as a frame of its own, smaller than that page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ..conf import MessagingSettings, get_settings
from ..core.protocol import INT_MAX, ack_ok, encoded_bytes

# The most bytes orjson writes for one character of a string.
ESCAPED = 6
# The longest display name of Django's user model: a first and a last name of 150 characters, and a space.
NAME_CHARS = 301
# The longest command id and room slug (PROTOCOL.md), and what `check_one_message_fits` allows a user id's text.
ID_CHARS = 64
# A room's slug, or a federated room's address: its slug, `@` and its home's name (PROTOCOL 1.2).
SLUG_CHARS = 64 + 1 + 16
# The longest deployment's name a user reference's `node` holds (ASCII, a byte a character).
NODE = "x" * 16
LONGEST_STATE = "delivered"
A_TIME = "2026-11-29T18:00:00.000000Z"
# Every key a stored message's `msg` d may hold (messaging/chat/messages.py),
# its text empty and its numbers at their longest; tests/unit/test_sizes.py
# checks the bound against every kind of stored message.
FULLEST_MESSAGE = {
    "room": "",
    "seq": INT_MAX,
    "id": "",
    "sender": {"id": "", "name": "", "node": NODE},
    "body": "",
    "at": A_TIME,
    "version": INT_MAX,
    "rev": INT_MAX,
    "deleted": True,
    "deleted_at": A_TIME,
    "edited_at": A_TIME,
    "state": "",
    "reply_to": INT_MAX,
    "replies": INT_MAX,
    "last_reply_at": A_TIME,
}
# One file of a message's `attachments` (messaging/chat/attachments.py), its text empty;
# and the most a message lists, each with the longest name and type an upload has and
# a `url` of at most `URL_CHARS` (a host's prefix and the id).
FULLEST_FILE = {"upload": "", "name": "", "size": INT_MAX, "content_type": "", "url": ""}
FILE_FIXED = encoded_bytes(FULLEST_FILE)
FILES_KEY = len(',"attachments":[]')
MOST_FILES = 10
FILE_TEXT_CHARS = 36 + 255 + 100
URL_CHARS = 300
# The longest emoji `reaction.set` takes (PROTOCOL.md 1.2).
EMOJI_CHARS = 16
# Every key of a member list's entry (messaging/chat/commands.py), `online` as the transport adds it.
FULLEST_MEMBER = {
    "user": "",
    "name": "",
    "delivered": INT_MAX,
    "read": INT_MAX,
    "joined_seq": INT_MAX,
    "node": NODE,
    "online": False,
}
MESSAGE_FIXED = encoded_bytes(FULLEST_MESSAGE)
MEMBER_FIXED = encoded_bytes(FULLEST_MEMBER)
# What the transport adds to each member entry (messaging/transport/presence.py's `add_online`).
ONLINE = len(',"online":false')


def message_bytes_at_most(d: dict[str, Any]) -> int:
    """At most the bytes of a stored message's `msg` d, without encoding it."""
    sender = d["sender"]
    text = len(d["body"]) + len(sender["name"]) + len(d["id"]) + len(str(sender["id"])) + len(d.get("state") or "")
    # A slug is plain ASCII: a byte a character.
    fixed = MESSAGE_FIXED + len(d["room"]) + ESCAPED * text
    return fixed + files_bytes_at_most(d.get("attachments")) + reactions_bytes_at_most(d)


# `"reactions":{}` and `"mine":[]` with their commas; per emoji its quotes, colon and
# comma, and a count at its longest; per own emoji its quotes and comma.
REACTIONS_KEYS = len(',"reactions":{},"mine":[]')
REACTION_FIXED = len('"":,') + len(str(INT_MAX))


def reactions_bytes_at_most(d: dict[str, Any]) -> int:
    """At most the bytes a message's `reactions` and `mine` add to its `msg` d (messaging/chat/shown.py)."""
    reactions = d.get("reactions")
    if not reactions:
        return 0
    emoji = sum(REACTION_FIXED + ESCAPED * len(e) for e in reactions)
    return REACTIONS_KEYS + emoji + sum(3 + ESCAPED * len(e) for e in d.get("mine") or ())


def files_bytes_at_most(files: list[dict[str, Any]] | None) -> int:
    """At most the bytes a message's `attachments` add to its `msg` d."""
    if not files:
        return 0
    text = sum(len(f["upload"]) + len(f["name"]) + len(f["content_type"]) + len(f["url"]) for f in files)
    return FILES_KEY + (FILE_FIXED + 1) * len(files) + ESCAPED * text


def member_bytes_at_most(entry: dict[str, Any]) -> int:
    """At most the bytes of a member list's entry as it is sent (with `online`), without encoding it."""
    return MEMBER_FIXED + ESCAPED * (len(entry["name"]) + len(str(entry["user"])))


def fitting(
    entries: Sequence[dict[str, Any]], at_most: Callable[[dict[str, Any]], int], budget: int, *, added: int = 0
) -> int:
    """How many of `entries`, from the first, fit in `budget` bytes as the items of a JSON array.

    `at_most` bounds an entry's bytes cheaply; `added` is what the transport
    adds to each entry after this count. Where the bounds fit, nothing is encoded.
    """
    if sum(map(at_most, entries)) + len(entries) <= budget + 1:
        return len(entries)
    # Items and the commas between them.
    used = -1
    for n, entry in enumerate(entries):
        used += encoded_bytes(entry) + added + 1
        if used > budget:
            return n
    return len(entries)


def ack_budget(command_id: str, empty_d: dict[str, Any]) -> int:
    """The bytes left for a list in an ok ack of `command_id` whose `d` is `empty_d` with that list empty."""
    return get_settings().largest_frame - encoded_bytes(ack_ok(command_id, empty_d))


def history_page_length(command_id: str, room: str, newest_first: Sequence[dict[str, Any]]) -> int:
    """How many of a `room.history` page's messages (their `d`, newest first) its ack holds: at least one."""
    budget = ack_budget(command_id, {"room": room, "messages": [], "more": True})
    return max(1, fitting(newest_first, message_bytes_at_most, budget)) if newest_first else 0


def search_page_length(command_id: str, newest_first: Sequence[dict[str, Any]]) -> int:
    """How many of a `room.search` page's results (their `d`, newest first) its ack holds: at least one."""
    budget = ack_budget(command_id, {"results": [], "more": True})
    return max(1, fitting(newest_first, message_bytes_at_most, budget)) if newest_first else 0


def thread_page_length(command_id: str, room: str, root: dict[str, Any], replies: Sequence[dict[str, Any]]) -> int:
    """How many of a `room.thread` page's replies (their `d`, oldest first) its ack holds beside its root."""
    empty = {"room": room, "root": root, "replies": [], "more": True}
    budget = ack_budget(command_id, empty)
    return max(1, fitting(replies, message_bytes_at_most, budget)) if replies else 0


def members_page_that_fits(command_id: str, room: str, members: list[dict[str, Any]], more: bool) -> dict[str, Any]:
    """A `room.members` ack's `d` with the first of `members` that fit (at least one, so `after` moves on)."""
    budget = ack_budget(command_id, {"room": room, "members": [], "more": True})
    n = max(1, fitting(members, member_bytes_at_most, budget, added=ONLINE)) if members else 0
    return {"room": room, "members": members[:n], "more": more or n < len(members)}


def join_ack_that_fits(ack: dict[str, Any], command_id: str, user_id: Any) -> dict[str, Any]:
    """The join ack `ack` with the first of its members that fit beside the rest of it,
    and the joining user's own entry (the last of the list where it was not among them)."""
    members = ack["members"]
    budget = ack_budget(command_id, {**ack, "members": []})
    n = fitting(members, member_bytes_at_most, budget, added=ONLINE)
    if n == len(members):
        return ack
    own = next((entry for entry in members if entry["user"] == user_id), None)
    if own is None or any(entry is own for entry in members[:n]):
        ack["members"] = members[:n]
        return ack
    n = fitting(members, member_bytes_at_most, budget - encoded_bytes(own) - ONLINE - 1, added=ONLINE)
    # In the list's order still: the own entry was past the first n.
    ack["members"] = [*members[:n], own]
    return ack


def longest_page_of_one(conf: MessagingSettings) -> int:
    """At most the bytes of a `room.history` ack holding one message, under `conf`."""
    empty = ack_ok("x" * ID_CHARS, {"room": "x" * SLUG_CHARS, "messages": [], "more": True})
    text = conf.BODY_MAX_CHARS + NAME_CHARS + ID_CHARS + ID_CHARS + len(LONGEST_STATE)
    files = FILES_KEY + MOST_FILES * (FILE_FIXED + 1 + ESCAPED * (FILE_TEXT_CHARS + URL_CHARS))
    reactions = REACTIONS_KEYS + conf.REACTION_EMOJI_MAX * (REACTION_FIXED + 3 + 2 * ESCAPED * EMOJI_CHARS)
    return encoded_bytes(empty) + MESSAGE_FIXED + SLUG_CHARS + ESCAPED * text + files + reactions


def check_one_message_fits(conf: MessagingSettings) -> None:
    """Refuse (`ImproperlyConfigured`) settings under which one message may not fit in a frame:
    a `room.history` page could not hold it, and scroll-back would stop there."""
    longest = longest_page_of_one(conf)
    if longest > conf.largest_frame:
        raise ImproperlyConfigured(
            f"MESSAGING['BODY_MAX_CHARS'] = {conf.BODY_MAX_CHARS}: a message that long can take {longest} bytes "
            f"in a frame, over MAX_SEND_BUFFER ({conf.MAX_SEND_BUFFER} bytes), the largest frame the server sends. "
            "Lower BODY_MAX_CHARS or raise MAX_SEND_BUFFER."
        )
