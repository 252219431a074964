"""`room.search` (PROTOCOL.md 1.2): the messages whose current body holds every word of `q`, newest first.

In the rooms the user is a member of, or in `room` alone (a member's
only, as `room.history`); invitees are no members. Deleted messages never
match (their body is ""), edited ones by their current body: the index is
of the body as it stands, kept current by every change of it.

**Words.** A word is a run of letters, digits and combining marks; all else
(spaces, punctuation, symbols, emoji) separates words, and case does not
count. So `foo-bar` is the words `foo` and `bar`, `ana@example.com` is
`ana`, `example` and `com`, and `3.14` is `3` and `14`. A word matches only
itself: not a prefix (`hel` does not find `hello`), not another form
(`cafe` does not find `café`, nor `run` `running`). The same on both
databases:

- PostgreSQL: the GIN index of migration 0031 over `to_tsvector('simple',
  ...)` of the body with ASCII punctuation turned into spaces (`DOCUMENT`,
  the very expression of the index, or it would not serve the query);
  'simple' folds case and does not stem. `q`'s words ANDed with
  `plainto_tsquery('simple', ...)`. Case folding of letters beyond ASCII
  needs a UTF-8 `LC_CTYPE` (C.UTF-8, en_US.UTF-8), as PostgreSQL's `lower`.
- SQLite: the FTS5 table of migration 0031 (tokenizer `unicode61`,
  diacritics kept), each word of `q` quoted (no operators, no prefixes).

Other databases have no index for it: the command is refused there.

**Cost.** With `room`, newest first is by seq: PostgreSQL walks the room's
(room, seq) index back from the newest message for a word in many messages
(a page in a millisecond), and reads a rarer word's messages from the
index (docs/PERFORMANCE.md, "Search"). Without it, across the user's rooms,
every message of theirs that holds the words is read and the newest kept:
a word in half of a million messages takes a good part of a second.

**Pages.** Newest first by `at`; the next page is asked with `before`: the
`at` of the last result. Messages posted together share an `at` (one batch
statement stamps all its posts with one time), so a page never ends inside
a group of equal `at`: it ends before the group (fewer than `limit`, `more`
true), or, where the group alone is more than `limit`, holds all of it (at
most `TIED_MAX`). Then `before` resumes exactly where the page ended.
Like `room.history`, a page holds what fits in one frame
(messaging/chat/sizes.py).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL

from ..core.exceptions import Invalid
from ..core.handlers import CommandContext, command
from ..core.protocol import room_slug
from ..models import Message
from .messages import stored_msg_frame
from .rooms import joined_room_id
from .shown import with_reactions
from .sizes import search_page_length

# PROTOCOL.md 1.2 fixes these.
Q_CHARS = 200
SEARCH_DEFAULT = 20
SEARCH_MAX = 50
# The most messages of one `at` a page holds whole; the app's own posts share an
# `at` in groups of at most one batch (64).
TIED_MAX = 500

# Migration 0031's index expression, to the character.
PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
DOCUMENT = "to_tsvector('simple'::regconfig, translate(BODY, '{}', '{}'))".format(
    PUNCTUATION.replace("'", "''"), " " * len(PUNCTUATION)
)
# As the ORM's query writes it, with psycopg's placeholders: its % doubled.
PG_MATCH = (
    DOCUMENT.replace("BODY", f'"{Message._meta.db_table}"."body"').replace("%", "%%")
    + " @@ plainto_tsquery('simple'::regconfig, %s)"
)
SQLITE_MATCHES = "SELECT rowid FROM messaging_message_search WHERE messaging_message_search MATCH %s"
WORD_CATEGORIES = frozenset("LNM")


@dataclass(frozen=True)
class Search:
    words: tuple[str, ...]
    room: str | None
    before: datetime | None
    limit: int


def words(q: str) -> tuple[str, ...]:
    """The words of `q` (see the module's docstring), each once, in order."""
    found: list[str] = []
    current: list[str] = []
    for char in q + " ":
        category = unicodedata.category(char)
        if category[0] in WORD_CATEGORIES or category == "Co":
            current.append(char)
        elif current:
            found.append("".join(current))
            current = []
    return tuple(dict.fromkeys(word.lower() for word in found))


def parse_at(value: Any) -> datetime:
    """A result's `at` (ISO 8601 with a zone), or `Invalid`."""
    if not isinstance(value, str) or len(value) > 40:
        raise Invalid("before must be the at of a result (ISO 8601)")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise Invalid("before must be the at of a result (ISO 8601)") from None
    if moment.tzinfo is None:
        raise Invalid("before must say its time zone (the results' at end in Z)")
    return moment


def validate_search(d: dict[str, Any]) -> Search:
    q = d.get("q")
    if not isinstance(q, str) or not 1 <= len(q) <= Q_CHARS:
        raise Invalid(f"q must be a string of 1-{Q_CHARS} characters")
    found = words(q)
    if not found:
        raise Invalid("q holds no word to search for (letters or digits)")
    limit = d.get("limit", SEARCH_DEFAULT)
    if limit is None:
        limit = SEARCH_DEFAULT
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= SEARCH_MAX:
        raise Invalid(f"limit must be an integer from 1 to {SEARCH_MAX}")
    room = None if d.get("room") is None else room_slug(d)
    before = None if d.get("before") is None else parse_at(d["before"])
    return Search(words=found, room=room, before=before, limit=limit)


def matching(user: Any, search: Search) -> QuerySet[Message]:
    """The messages `user` may find with `search`'s words, newest first (before `before`)."""
    if connection.vendor == "postgresql":
        match = RawSQL(PG_MATCH, [" ".join(search.words)], output_field=BooleanField())
        found = Message.objects.filter(match)
    elif connection.vendor == "sqlite":
        quoted = " ".join(f'"{word}"' for word in search.words)
        found = Message.objects.filter(id__in=RawSQL(SQLITE_MATCHES, [quoted]))
    else:
        raise Invalid(f"room.search needs PostgreSQL or SQLite, not {connection.vendor}")
    if search.before is not None:
        found = found.filter(sent_at__lt=search.before)
    found = found.filter(deleted_at__isnull=True).select_related("room", "sender", "thread")
    if search.room is not None:
        # In one room `at` follows seq (a post takes both under the room's lock): by seq, the
        # (room, seq) index walks back from the newest, which a common word stops soon.
        return found.filter(room_id=joined_room_id(user, search.room)).order_by("-seq")
    return found.filter(room__memberships__user=user).order_by("-sent_at", "-room_id", "-seq")


def whole_groups(found: QuerySet[Message], page: list[Message], more: bool, next_at: Any) -> tuple[list[Message], bool]:
    """`page` cut so that it ends at a change of `at` (`next_at`: the `at` of the message after it)."""
    if not more or page[-1].sent_at != next_at:
        return page, more
    before_group = [m for m in page if m.sent_at != next_at]
    if before_group:
        return before_group, True
    group = list(found.filter(sent_at=next_at)[:TIED_MAX])
    return group, found.filter(sent_at__lt=next_at).exists() or len(group) == TIED_MAX


@command("room.search", validate=validate_search, exactly_once=False)
def room_search(ctx: CommandContext, search: Search) -> dict[str, Any]:
    found = matching(ctx.user, search)
    first = list(found[: search.limit + 1])
    if not first:
        return {"results": [], "more": False}
    more = len(first) > search.limit
    page, more = whole_groups(found, first[: search.limit], more, first[-1].sent_at if more else None)
    results = [stored_msg_frame(m, m.room.slug, ctx.user)["d"] for m in page]
    with_reactions(results, page, ctx.user)
    kept = search_page_length(ctx.command_id, results)
    if kept < len(results):
        # What fits, still ending at a change of `at` where that leaves any.
        while kept > 1 and page[kept].sent_at == page[kept - 1].sent_at:
            kept -= 1
        results, more = results[:kept], True
    return {"results": results, "more": more}
