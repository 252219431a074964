"""What a replica missed, read from the home's rooms, not from events (docs/FEDERATION.md, "When a peer is away").

A replica that finds a gap in a room's revs, or a room whose home says it
is further on than the changes that came (its events pruned after a long
outage), or that joins a room it holds nothing of yet, asks the home for
the room after its rev (`POST /federation/fetch`), page by page.

The home's page (`page`) holds every message changed after `after_rev`,
each once, in its current state, by its place as a `since_rev` replay
orders them (messaging/chat/replay.py): a message posted after `after_rev`
at its post's rev, an older one at its latest change's. The page ends at a
place (`upto`) where it fills (`FEDERATION_FETCH_LIMIT` entries, half of
`FEDERATION_MAX_BODY` bytes); every change up to `upto` is then shown, or
superseded by a later change of the same message, which a later page
brings. Reaction counts come as the apps' replay hooks send them, and the
asking peer's members' watermarks with them.

The replica applies a page in one transaction (`apply_page`): a message
only where the page's version is newer than its copy's, the room's
`last_rev` raised to `upto`. Its sockets get each change as a frame.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F

from ..chat.emoji import changed_tallies
from ..chat.hooks import replay_hooks
from ..chat.nodes import remote_account_name
from ..chat.threads import changed_threads
from ..conf import get_settings
from ..core.protocol import ROOM_SLUG, format_time
from ..core.runtime import runtime
from ..models import Membership, Message, Room
from .addresses import replica_name
from .applying import STATES, Frames, Replica, _appliers, frame_events, parse_time, replica_room
from .counts import reacted, threaded
from .gate import Refusal
from .identities import identity_of, local_users, wire_many
from .models import PeerRoom
from .peers import PeerUnavailable, call

log = logging.getLogger(__name__)


# -- the home's side ----------------------------------------------------------------


def page(peer: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The page of the room `payload["room"]` after `payload["after_rev"]`, for `peer` (it must share the room)."""
    from .config import federation

    slug, after = payload.get("room"), payload.get("after_rev")
    if not isinstance(slug, str) or not ROOM_SLUG.fullmatch(slug) or not isinstance(after, int) or after < 0:
        raise Refusal('{"room": a slug, "after_rev": an integer >= 0}')
    room = Room.objects.filter(slug=slug).first()
    if room is None or not PeerRoom.objects.filter(room=room, peer=peer).exists():
        raise Refusal(f"room {slug} is not shared with {peer}")
    found = federation()
    assert found is not None
    conf = get_settings()
    limit, upto = conf.FEDERATION_FETCH_LIMIT, room.last_rev
    # One more than a page from each source: where one has more, the page ends before its
    # first left out (the `limit`-th entry of all of them comes before it).
    more = limit + 1
    messages = Message.objects.filter(room=room).select_related("sender")
    placed: list[tuple[int, Any]] = [
        (m.posted_rev or 0, m)
        for m in messages.filter(posted_rev__gt=after, posted_rev__lte=upto).order_by("posted_rev")[:more]
    ]
    changed = messages.filter(posted_rev__lte=after, rev__gt=after, rev__lte=upto).filter(rev__gt=F("posted_rev"))
    placed += [(m.rev or 0, m) for m in changed.order_by("rev")[:more]]
    for changes in (changed_threads, changed_tallies, *replay_hooks()):
        placed += [(place, frame) for place, _, frame in changes(room, after, upto, more)]
    placed.sort(key=lambda entry: entry[0])
    senders = wire_many({item.sender_id for _, item in placed if isinstance(item, Message)}, found.node)
    budget, used = conf.FEDERATION_MAX_BODY // 2, 0
    kept: list[tuple[int, dict[str, Any]]] = []
    for place, item in placed[:limit]:
        entry = message_entry(item, senders) if isinstance(item, Message) else {"t": item["t"], "d": item["d"]}
        used += len(orjson.dumps(entry))
        if kept and used > budget:
            break
        kept.append((place, entry))
    cut = upto if len(kept) == len(placed) else kept[-1][0]
    return {
        "room": slug,
        "after_rev": after,
        "upto": cut,
        "last_rev": upto,
        "messages": [entry for _, entry in kept if "t" not in entry],
        "frames": [entry for _, entry in kept if "t" in entry],
        "watermarks": peer_watermarks(room, peer, found.node, limit),
    }


def message_entry(message: Message, senders: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    """A message as a page carries it: all of its current state."""
    return {
        "seq": message.seq,
        "id": message.client_msg_id,
        "sender": senders.get(message.sender_id),
        "body": message.body,
        "at": format_time(message.sent_at),
        "version": message.version,
        "posted_rev": message.posted_rev,
        "rev": message.rev,
        "state": message.state,
        "delivered_at": format_time(message.delivered_at) if message.delivered_at else None,
        "read_at": format_time(message.read_at) if message.read_at else None,
        "edited_at": format_time(message.edited_at) if message.edited_at else None,
        "deleted_at": format_time(message.deleted_at) if message.deleted_at else None,
        "reply_to": message.reply_to,
    }


def peer_watermarks(room: Room, peer: str, own: str, limit: int) -> list[dict[str, Any]]:
    """The watermarks of `peer`'s users in `room` (the replica keeps its own users'), at most `limit`."""
    field = f"user__{get_user_model().USERNAME_FIELD}__startswith"
    members = (
        Membership.objects.filter(room=room, **{field: remote_account_name(peer, "")})
        .order_by("-pk")
        .values_list("user_id", "delivered", "read")[:limit]
    )
    rows = list(members)
    users = wire_many({user for user, _, _ in rows}, own)
    return [{"user": users[user], "delivered": d, "read": r} for user, d, r in rows if user in users]


# -- the replica's side -------------------------------------------------------------


def apply_page(home: str, given: dict[str, Any]) -> tuple[Frames, int, bool]:
    """A page from `home`, in one transaction: the frames it makes, the replica's rev, and whether it is complete."""
    from .config import federation

    slug, upto, last_rev = given.get("room"), given.get("upto"), given.get("last_rev")
    messages, frames_given, marks = (
        given.get("messages") or [],
        given.get("frames") or [],
        given.get("watermarks") or [],
    )
    if not (
        isinstance(slug, str)
        and ROOM_SLUG.fullmatch(slug)
        and isinstance(upto, int)
        and isinstance(last_rev, int)
        and all(isinstance(x, list) and all(isinstance(i, dict) for i in x) for x in (messages, frames_given, marks))
    ):
        raise PeerUnavailable(f"a page of {home} that is not one")
    found = federation()
    assert found is not None
    identities = [i for i in (identity_of(m.get(k)) for m in [*messages, *marks] for k in ("sender", "user")) if i]
    users = local_users(identities, found.node)
    frames = Frames()
    with transaction.atomic():
        room = replica_room(slug, home, lock=True)
        replica = Replica(room, users, frames)
        replica.load([entry.get("seq") for entry in messages])
        for entry in messages:
            upsert(replica, entry)
        replica.flush()
        for frame in frames_given:
            kind = frame_events.get(frame.get("t"))
            if frame.get("t") == "thread" and isinstance(frame.get("d"), dict):
                threaded(replica, frame["d"])
            elif frame.get("t") == "reactions" and isinstance(frame.get("d"), dict):
                reacted(replica, frame["d"])
            elif kind in _appliers and isinstance(frame.get("d"), dict):
                _appliers[kind](room, {**frame["d"], "room": room.slug}, frames)
        for mark in marks:
            user = replica.user(mark.get("user"))
            if user is not None and isinstance(mark.get("delivered"), int) and isinstance(mark.get("read"), int):
                replica.move(user, mark["delivered"], mark["read"])
        room.last_rev = max(room.last_rev, upto)
        room.save(update_fields=["last_rev", "last_seq"])
    return frames, room.last_rev, room.last_rev >= last_rev


def upsert(replica: Replica, entry: dict[str, Any]) -> None:
    """One message of a page: stored where new, updated where the page's version is newer; its frame."""
    room, seq, version = replica.room, entry.get("seq"), entry.get("version")
    sender, person, at = (
        replica.user(entry.get("sender")),
        replica.person(entry.get("sender")),
        parse_time(entry.get("at")),
    )
    if sender is None or person is None or not isinstance(seq, int) or not isinstance(version, int) or at is None:
        log.warning("a page's message of %s without its sender, seq, version or time", room.slug)
        return
    message = replica.message(seq)
    if message is None:
        message = replica.store(sender, seq, {**entry, "rev": entry.get("posted_rev")}, at)
    elif version <= message.version and STATES.index(entry.get("state", "sent")) <= STATES.index(message.state):
        room.last_seq = max(room.last_seq, seq)
        return
    message.body, message.version, message.rev = entry.get("body") or "", version, entry.get("rev")
    message.edited_at, message.deleted_at = parse_time(entry.get("edited_at")), parse_time(entry.get("deleted_at"))
    if entry.get("state") in STATES and STATES.index(entry["state"]) > STATES.index(message.state):
        message.state = entry["state"]
        message.delivered_at, message.read_at = parse_time(entry.get("delivered_at")), parse_time(entry.get("read_at"))
    replica.save(message, ["body", "version", "rev", "edited_at", "deleted_at", "state", "delivered_at", "read_at"])
    room.last_seq = max(room.last_seq, seq)
    d = {
        "room": room.slug,
        "seq": seq,
        "id": message.client_msg_id,
        "sender": person,
        "body": message.body,
        "at": entry["at"],
        "version": version,
        "rev": message.rev,
    }
    if message.deleted_at is not None:
        d.update(deleted=True, deleted_at=entry["deleted_at"])
    if message.edited_at is not None:
        d["edited_at"] = entry["edited_at"]
    replica.frames.room(room.slug, {"t": "msg", "d": d}, seq)


def rev_of(slug: str, home: str) -> int:
    return Room.objects.filter(slug=replica_name(slug, home)).values_list("last_rev", flat=True).first() or 0


async def catch_up(home: str, slug: str, until: int | None = None, deadline: float | None = None) -> bool:
    """Fetch pages of the room `slug` of `home` until the replica reaches `until` (None: the home's
    rev as the pages say it); whether it did. A home that cannot be reached ends it (False)."""
    gateway = runtime().gateway
    while True:
        rev = await gateway.run(rev_of, slug, home)
        if until is not None and rev >= until:
            return True
        try:
            given = await call(home, "/federation/fetch", {"room": slug, "after_rev": rev})
            frames, now, complete = await gateway.run(apply_page, home, given)
        except PeerUnavailable as exc:
            log.warning("catching up on %s of %s: %s", slug, home, exc)
            return False
        frames.publish()
        if complete or now <= rev:
            return until is None or now >= until
        if deadline is not None and time.monotonic() > deadline:
            return False


def behind(home: str, slug: str) -> None:
    """Catch up on the room `slug` of `home` in the background, unless this loop is already at it."""
    running: dict[tuple[str, str], asyncio.Task[bool]] = runtime().part("federation catch-ups", dict)
    key = (home, slug)
    task = running.get(key)
    if task is not None and not task.done():
        return
    running[key] = asyncio.ensure_future(catch_up(home, slug))
