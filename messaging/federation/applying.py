"""A replica applies what its rooms' homes send: pushed changes, in rev order, once each.

A push (`POST /federation/changes`) brings, per room of the home, the room's
changes in the order of their events (`position`). Each room's are applied
in one transaction, under the replica's room row lock, with the room's
`last_rev`: the replica's record of what it applied, so a change is applied
once however often it comes.

- A change with a rev (a post, edit, delete, reaction, thread) at most `last_rev`
  came before: it is passed over. The next rev is applied. A later one is a
  gap: it and what follows stay for the next push, and the replica fetches
  what it missed (catchup.py).
- A change without one (a message's state, a member's watermarks) only ever
  moves forward: applied again, it changes nothing.
- Every user is written `{node, id, name}` and becomes a local account
  (identities.py) before the transactions.

After the commit the replica's sockets joined to the room get the frames
the home's sockets got (the room named `slug@home`, users by their ids
here), through this process's hub. The answer says, per room, the last
position taken and the replica's rev: the home's cursor moves to it.

A reply's post brings its `reply_to`, and its `thread.changed` (with a rev
of its own, the next after its reply's) the root's count as the home has it; an emoji's
`reaction.changed` (with `emoji`) sets the replica's count of it. Both are
kept only where newer (by rev) than what the replica has, and told to its
sockets (`thread`, `reactions`); a catch-up page brings the same as frames.

Deleted means gone here too: a `message.deleted` blanks the replica's copy
of the body, the only one it keeps (a replica writes no events, keeps no
edit history and sends no mentions for its replicas).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from ..chat.emoji import forget_reactions
from ..conf import get_settings
from ..core.protocol import encode
from ..models import Membership, Message, MessageState, Room
from .addresses import replica_name
from .counts import reacted, threaded
from .gate import Refusal
from .identities import identity_of, local_users

log = logging.getLogger(__name__)

# Types whose changes take a rev: applied in rev order.
WITH_REV = frozenset({"message.posted", "message.edited", "message.deleted", "reaction.changed", "thread.changed"})
STATES = (MessageState.SENT, MessageState.DELIVERED, MessageState.READ)
# A frame type's applier from an app beside the chat (`on_replicated`): `(room, data, frames) -> None`,
# in the room's transaction; `data` is the frame's `d` as the home sent it, its room the replica's.
Applier = Callable[[Room, dict[str, Any], "Frames"], None]
_appliers: dict[str, Applier] = {}
# The event type of a frame type an app's replay hook sends (catch-up pages carry frames).
frame_events: dict[str, str] = {}


def on_replicated(event_type: str, apply: Applier, *, frame: str | None = None) -> Applier:
    """Register how a replica applies changes of `event_type` (an app's own, as
    `messaging.contrib.reactions` applies `reaction.changed`), and which frame
    type (its `on_replay` hook's) tells the same change; returns `apply`."""
    _appliers[event_type] = apply
    if frame is not None:
        frame_events[frame] = event_type
    return apply


@dataclass
class Frames:
    """What an applied transaction tells this deployment's sockets, after commit."""

    to_rooms: list[tuple[str, int | None, dict[str, Any]]] = field(default_factory=list)
    to_users: list[tuple[Any, str, dict[str, Any]]] = field(default_factory=list)

    def room(self, room: str, frame: dict[str, Any], seq: int | None = None) -> None:
        self.to_rooms.append((room, seq, frame))

    def user(self, user_id: Any, room: str, frame: dict[str, Any]) -> None:
        self.to_users.append((user_id, room, frame))

    def publish(self) -> None:
        from ..transport.fanout import get_hub

        hub = get_hub()
        for room, seq, frame in self.to_rooms:
            hub.publish(room, seq, encode(frame))
        for user_id, room, frame in self.to_users:
            hub.publish_to_user(user_id, room, encode(frame))


def parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def replica_room(slug: str, home: str, *, lock: bool = False) -> Room:
    """The replica of the room `slug` of `home`, made the first time (`lock`: its row locked until commit)."""
    room, _ = Room.objects.get_or_create(slug=replica_name(slug, home))
    return Room.objects.select_for_update().get(pk=room.pk) if lock else room


def user_identities(datas: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """Every user the changes' data name (`sender`, `user`)."""
    found = []
    for data in datas:
        for key in ("sender", "user"):
            identity = identity_of(data.get(key))
            if identity is not None:
                found.append(identity)
    return found


class Replica:
    """One room's replica in one transaction: changes applied, frames gathered.

    The messages a batch names are read in one query (`load`), new ones are
    written together at the end (`flush`): a push or a page of hundreds of
    changes is a few statements, not several per change.
    """

    def __init__(self, room: Room, users: dict[tuple[str, str], Any], frames: Frames) -> None:
        self.room = room
        self.users = users
        self.frames = frames
        self.known: dict[int, Message] = {}
        # Made in this transaction, written by `flush`.
        self.new: dict[int, Message] = {}

    def load(self, seqs: list[Any]) -> None:
        wanted = [seq for seq in seqs if isinstance(seq, int)]
        self.known.update({m.seq: m for m in Message.objects.filter(room=self.room, seq__in=wanted)})

    def user(self, value: Any) -> Any | None:
        identity = identity_of(value)
        return None if identity is None else self.users.get(identity[:2])

    def person(self, value: Any) -> dict[str, Any] | None:
        user = self.user(value)
        identity = identity_of(value)
        return None if user is None or identity is None else {"id": user.pk, "name": identity[2], "node": identity[0]}

    def message(self, seq: Any) -> Message | None:
        """The replica's message `seq`, as this transaction left it (`load` read the batch's first)."""
        if not isinstance(seq, int):
            return None
        return self.new.get(seq) or self.known.get(seq)

    def save(self, message: Message, fields: list[str]) -> None:
        if message.seq not in self.new:
            message.save(update_fields=fields)

    # -- with a rev ---------------------------------------------------------------

    def posted(self, data: dict[str, Any]) -> None:
        sender, seq = self.user(data.get("sender")), data.get("seq")
        person = self.person(data.get("sender"))
        at = parse_time(data.get("at"))
        if sender is None or person is None or not isinstance(seq, int) or at is None:
            log.warning("a post of %s without its sender, seq or time", self.room.slug)
            return
        self.room.last_seq = max(self.room.last_seq, seq)
        if self.message(seq) is not None:
            return  # a catch-up page brought it, newer, and told the sockets
        self.store(sender, seq, data, at)
        d = {**data, "room": self.room.slug, "sender": person}
        self.frames.room(self.room.slug, {"t": "msg", "d": d}, seq)

    def store(self, sender: Any, seq: int, data: dict[str, Any], at: datetime) -> Message:
        """A new message of the replica, written by `flush`."""
        message = Message(
            room=self.room,
            seq=seq,
            sender=sender,
            client_msg_id=str(data.get("id") or "")[:64],
            body=data.get("body") or "",
            sent_at=at,
            version=data.get("version") or 1,
            posted_rev=data.get("rev"),
            rev=data.get("rev"),
            reply_to=data.get("reply_to") if isinstance(data.get("reply_to"), int) else None,
        )
        self.new[seq] = message
        return message

    def flush(self) -> None:
        """The new messages, in one statement; one by one where that fails."""
        messages, self.new = list(self.new.values()), {}
        if not messages:
            return
        self.known.update({m.seq: m for m in messages})
        try:
            with transaction.atomic():
                Message.objects.bulk_create(messages)
            return
        except IntegrityError:
            pass
        for message in messages:
            try:
                with transaction.atomic():
                    message.save(force_insert=True)
            except IntegrityError:
                # The sender used this id for a message of another room (a client
                # that reuses ids): the copy keeps the seq, under an id of its own,
                # rather than stop the room's replication.
                log.error("%s#%s: its sender's id is taken here; kept under another", self.room.slug, message.seq)
                message.pk, message.client_msg_id = None, f"{message.client_msg_id[:40]}~{self.room.pk}~{message.seq}"
                message.save(force_insert=True)

    def changed(self, data: dict[str, Any], kind: str) -> None:
        message = self.message(data.get("seq"))
        version = data.get("version")
        if message is None or not isinstance(version, int) or version <= message.version:
            return  # newer here already (a catch-up page), or never posted
        message.version, message.rev = version, data.get("rev")
        if kind == "message.edited":
            message.body, message.edited_at = data.get("body") or "", parse_time(data.get("edited_at"))
            self.save(message, ["body", "version", "rev", "edited_at"])
        else:
            message.body, message.deleted_at = "", parse_time(data.get("deleted_at"))
            self.save(message, ["body", "version", "rev", "deleted_at"])
            if message.pk is not None:
                forget_reactions(message)
        frame = "msg.edit" if kind == "message.edited" else "msg.delete"
        self.frames.room(self.room.slug, {"t": frame, "d": {**data, "room": self.room.slug}})

    # -- without one --------------------------------------------------------------

    def state(self, data: dict[str, Any]) -> None:
        message, state = self.message(data.get("seq")), data.get("state")
        if message is None or state not in STATES[1:]:
            return
        if STATES.index(state) <= STATES.index(message.state):
            return
        at = parse_time(data.get("at"))
        message.state = state
        if state == MessageState.DELIVERED:
            message.delivered_at = at
        else:
            message.read_at, message.delivered_at = at, message.delivered_at or at
        self.save(message, ["state", "delivered_at", "read_at"])
        self.frames.user(message.sender_id, self.room.slug, {"t": "state", "d": {**data, "room": self.room.slug}})

    def watermarks(self, data: dict[str, Any]) -> None:
        user, delivered, read = self.user(data.get("user")), data.get("delivered"), data.get("read")
        if user is None or not isinstance(delivered, int) or not isinstance(read, int) or read > delivered:
            return
        self.move(user, delivered, read)
        members = data.get("members")
        if not isinstance(members, int) or members <= get_settings().MEMBERS_ON_JOIN:
            status = {"room": self.room.slug, "user": user.pk, "delivered": delivered, "read": read}
            self.frames.room(self.room.slug, {"t": "status", "d": status})

    def move(self, user: Any, delivered: int, read: int) -> None:
        """This deployment's user's watermarks in the replica, forward only (its own are kept here)."""
        membership = Membership.objects.select_for_update().filter(room=self.room, user=user).first()
        if membership is not None and (delivered > membership.delivered or read > membership.read):
            membership.delivered = max(membership.delivered, delivered)
            membership.read = max(membership.read, read)
            membership.save(update_fields=["delivered", "read"])

    def apply(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "message.posted":
            self.posted(data)
        elif kind in ("message.edited", "message.deleted"):
            self.changed(data, kind)
        elif kind == "message.state":
            self.state(data)
        elif kind == "member.watermarks":
            self.watermarks(data)
        elif kind == "reaction.changed" and "emoji" in data:
            reacted(self, data)
        elif kind == "thread.changed":
            threaded(self, data)
        elif kind in _appliers:
            self.flush()  # an app's applier reads the messages from the database
            _appliers[kind](self.room, {**data, "room": self.room.slug}, self.frames)


@dataclass
class Taken:
    """How far a replica took one room of a push."""

    room: str
    position: int | None
    rev: int
    # Short of the home: a gap, or a `last_rev` the changes did not reach.
    behind: bool


def take_room(home: str, entry: dict[str, Any], users: dict[tuple[str, str], Any], frames: Frames) -> Taken:
    """One room of a push, in one transaction (see the module's docstring)."""
    slug, changes = entry["room"], entry["changes"]
    position: int | None = None
    gap = False
    if not Room.objects.filter(slug=replica_name(slug, home)).exists():
        # No user here joined it (or not yet): nothing to keep. A first join fetches it whole.
        last = changes[-1].get("position") if changes else None
        return Taken(slug, last if isinstance(last, int) else None, 0, False)
    with transaction.atomic():
        room = replica_room(slug, home, lock=True)
        replica = Replica(room, users, frames)
        replica.load([c["data"].get("seq") for c in changes if isinstance(c.get("data"), dict)])
        for change in changes:
            kind, data = change.get("type"), change.get("data")
            if not isinstance(data, dict) or not isinstance(change.get("position"), int):
                raise Refusal("a change needs its position, type and data")
            rev = data.get("rev") if kind in WITH_REV else None
            if isinstance(rev, int):
                if rev <= room.last_rev:
                    position = change["position"]
                    continue
                if rev > room.last_rev + 1:
                    gap = True
                    break
                replica.apply(kind, data)
                room.last_rev = rev
            else:
                replica.apply(kind, data)
            position = change["position"]
        replica.flush()
        room.save(update_fields=["last_rev", "last_seq"])
    last_rev = entry.get("last_rev")
    behind = gap or (entry.get("complete") is True and isinstance(last_rev, int) and room.last_rev < last_rev)
    return Taken(slug, position, room.last_rev, behind)


def take(home: str, payload: dict[str, Any]) -> tuple[list[Taken], Frames]:
    """A push from `home`: per room, how far it was taken; the frames to publish once committed."""
    from .config import federation

    rooms = payload.get("rooms")
    most = 2 * get_settings().FEDERATION_BATCH
    if not isinstance(rooms, list) or not all(_room_entry(entry) for entry in rooms):
        raise Refusal('{"rooms": [{"room", "last_rev", "complete", "changes": [...]}, ...]}')
    if sum(len(entry["changes"]) for entry in rooms) > most:
        raise Refusal(f"a push holds at most {most} changes")
    found = federation()
    assert found is not None
    datas = [
        c["data"]
        for entry in rooms
        for c in entry["changes"]
        if isinstance(c, dict) and isinstance(c.get("data"), dict)
    ]
    users = local_users(user_identities(datas), found.node)
    frames = Frames()
    return [take_room(home, entry, users, frames) for entry in rooms], frames


def _room_entry(entry: Any) -> bool:
    from ..core.protocol import ROOM_SLUG

    return (
        isinstance(entry, dict)
        and isinstance(entry.get("room"), str)
        and ROOM_SLUG.fullmatch(entry["room"]) is not None
        and isinstance(entry.get("changes"), list)
        and all(isinstance(change, dict) for change in entry["changes"])
    )
