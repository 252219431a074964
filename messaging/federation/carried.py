"""The home's side of a carried command (`POST /federation/commands`): a peer's user's commands on rooms of this deployment.

The peer sends one user's commands, in order, as its socket sent them. They
run through the pipeline as the account this deployment keeps for that user
(identities.py), so exactly-once is scoped to (the peer, its user, the id):
the account's `CommandRecord`s. Each gets the ack a socket would get, its
effects are published to this deployment's sockets, and the users its ack
names are written by their home identity (`{node, id, name}`). Refused here,
before the pipeline, each for itself: a type that is not carried, a room
that is not a bare slug of this deployment (no command is carried on), a
private room (`forbidden`: only public rooms are shared), the user's rate.

A peer's first join of a room makes the room shared with it (`PeerRoom`):
from then on the room's changes are pushed to it (pushing.py), from the
room's event position before the join, so nothing after the join is missed.
"""

from __future__ import annotations

from typing import Any

from ..core import handlers, pipeline
from ..core.exceptions import CommandError, Forbidden, Invalid, RateLimited, Unavailable
from ..core.gateway import Gateway
from ..core.outcomes import Outcome
from ..core.protocol import COMMAND_ID, INT_MAX, ROOM_SLUG, Command, ack_error, ack_ok
from ..core.runtime import runtime
from ..models import Room
from ..transport.presence import add_online
from ..transport.ratelimit import user_limiter
from ..transport.submitting import publish
from .config import federation
from .gate import Refusal
from .identities import identity_of, local_user, wire_many
from .models import PeerRoom

# What a replica carries home (routing.py has the rest of the table).
CARRIED = frozenset(
    {
        "room.post",
        "message.edit",
        "message.delete",
        "reaction.add",
        "reaction.set",
        "receipt",
        "room.join",
        "room.members",
        "room.leave",
    }
)
# Commands of one request: a socket's batch (messaging/core/pipeline.py's BATCH_LIMIT).
MOST_COMMANDS = pipeline.BATCH_LIMIT


async def run_carried(peer: str, payload: dict[str, Any]) -> dict[str, Any]:
    found = federation()
    assert found is not None
    identity = (
        identity_of({**(payload.get("user") or {}), "node": peer}) if isinstance(payload.get("user"), dict) else None
    )
    commands = payload.get("commands")
    if identity is None or not isinstance(commands, list) or not 0 < len(commands) <= MOST_COMMANDS:
        raise Refusal(f'{{"user": {{"id", "name"}}, "commands": [1 to {MOST_COMMANDS} commands]}}')
    parsed = [_command(c) for c in commands]
    gateway = runtime().gateway
    user = await gateway.run(local_user, identity, found.node)
    if user is None:
        raise Refusal("no such user")
    private = await gateway.run(_private_rooms, {c.d["room"] for c, _ in parsed if _ is None})
    limiter = user_limiter()
    acks: list[dict[str, Any]] = []
    for command, refusal in parsed:
        if refusal is None and command.d["room"] in private:
            refusal = Forbidden("this room is private: only public rooms are shared between deployments")
        if refusal is None:
            wait = await limiter.ahit(user.pk)
            if wait:
                refusal = RateLimited(retry_after=wait)
        if refusal is not None:
            acks.append(dict(ack_error(command.id, refusal.as_error())))
            continue
        acks.append(await _run(gateway, user, peer, command))
    await _write_users(acks, found.node, gateway)
    return {"acks": acks}


def _command(given: Any) -> tuple[Command, CommandError | None]:
    """A carried command, and why it is refused before it runs (None: it runs)."""
    if not isinstance(given, dict) or not isinstance(given.get("id"), str) or not COMMAND_ID.fullmatch(given["id"]):
        raise Refusal("each command needs an id of the protocol's rules")
    command = Command(id=given["id"], t=given.get("t"), d=given.get("d"))
    if command.t not in CARRIED:
        return command, Invalid(f"{command.t!r} is not carried between deployments")
    room = command.d.get("room") if isinstance(command.d, dict) else None
    if not isinstance(room, str) or not ROOM_SLUG.fullmatch(room):
        return command, Invalid("room must be a room of the deployment the command is carried to")
    if command.t == "room.join":
        # The backlog is the replica's own (joins.py): none is read here.
        command = Command(id=command.id, t=command.t, d={"room": room, "since_rev": INT_MAX})
    return command, None


def _private_rooms(slugs: set[str]) -> set[str]:
    return set(Room.objects.filter(slug__in=slugs, private=True).values_list("slug", flat=True))


async def _run(gateway: Gateway, user: Any, peer: str, command: Command) -> dict[str, Any]:
    before = None
    if command.t == "room.join":
        before = await gateway.run(_events_so_far, command.d["room"])
    try:
        [result] = await pipeline.run([pipeline.prepare(user, command)])
    except CommandError as exc:
        return dict(ack_error(command.id, exc.as_error()))
    if not isinstance(result, Outcome):
        error = result if isinstance(result, CommandError) else Unavailable()
        return dict(ack_error(command.id, error.as_error()))
    if handlers.lookup(command.t).member_list:
        await add_online(result.data.get("members") or [])
    if command.t == "room.join":
        await gateway.run(_share, command.d["room"], peer, before or 0)
    publish(result)
    return dict(ack_ok(command.id, result.data, dup=result.dup))


def _events_so_far(slug: str) -> int:
    return Room.objects.filter(slug=slug).values_list("last_event", flat=True).first() or 0


def _share(slug: str, peer: str, position: int) -> None:
    """The room is shared with `peer` from the event `position` on (kept if it was already)."""
    room_id = Room.objects.filter(slug=slug).values_list("pk", flat=True).first()
    if room_id is not None:
        PeerRoom.objects.get_or_create(room_id=room_id, peer=peer, defaults={"position": position})


async def _write_users(acks: list[dict[str, Any]], own: str, gateway: Gateway) -> None:
    """The user ids the acks name (member lists, a room's owner) as `{node, id, name}`."""
    ids: set[Any] = set()
    for ack in acks:
        d = ack.get("d") or {}
        ids.update(entry["user"] for entry in d.get("members") or ())
        if d.get("owner") is not None:
            ids.add(d["owner"])
    if not ids:
        return
    users = await gateway.run(wire_many, ids, own)
    for ack in acks:
        d = ack.get("d") or {}
        for entry in d.get("members") or ():
            entry["user"] = users.get(entry["user"])
        if d.get("owner") is not None:
            d["owner"] = users.get(d["owner"])
