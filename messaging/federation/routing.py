"""The replica's side: commands of this deployment's users on rooms of another, sent home (PROTOCOL.md 1.2).

Installed as the pipeline's router (messaging/core/pipeline.py, `route_with`):
a delivery whose room is `slug@node` of a peer is not claimed or applied
here. What each type does (docs/FEDERATION.md, "The model"):

- carried home (`carried.CARRIED`): one request per home for a sender's
  group, in its order, through `POST /federation/commands`; the home's ack
  is the client's, its room written `slug@node` and the users it names as
  this deployment's ids. A home that cannot be reached, or answers
  nothing usable, is `unavailable` (retry: true).
- exactly-once among them: the user's `CommandRecord` here is looked up
  first (a retry the home acked before is answered from it, home or not,
  and an id used before on one of this deployment's own rooms is
  `id_reused`), and written once the home acks `ok`.
- `room.history`, `room.thread` and `typing` (`HERE`) are not routed: they run on the
  replica, from what it applied (history) or among its own sockets (typing).
- any other type naming a remote room is `forbidden`: rooms are created,
  invited to and moderated at home.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from itertools import groupby
from typing import Any

from django.db import IntegrityError

from ..chat.messages import display_name
from ..chat.private import left_frame
from ..core import exceptions
from ..core.claims import Stored
from ..core.exceptions import CommandError, Forbidden, Invalid, Unavailable
from ..core.gateway import Gateway
from ..core.outcomes import Delivery, Outcome
from ..core.records import in_record_order, replay_or_refuse
from ..core.runtime import runtime
from ..models import CommandRecord, Membership
from .addresses import home_of, replica_name
from .applying import replica_room
from .carried import CARRIED
from .config import federation
from .identities import identity_of, local_users
from .peers import PeerUnavailable, call

log = logging.getLogger(__name__)

# Types answered on the replica, not carried home.
HERE = frozenset({"room.history", "room.thread", "typing"})
# The refusals a home's ack may carry, by code.
REFUSALS: dict[str, type[CommandError]] = {
    cls.code: cls
    for cls in (
        exceptions.Invalid,
        exceptions.UnknownType,
        exceptions.Forbidden,
        exceptions.IdReused,
        exceptions.InProgress,
        exceptions.Unavailable,
        exceptions.RateLimited,
    )
}


def room_of(data: Any) -> Any:
    return data.get("room") if isinstance(data, dict) else getattr(data, "room", None)


class Router:
    """The pipeline's router (messaging/core/pipeline.py's `Router`)."""

    def routes(self, delivery: Delivery) -> bool:
        room = room_of(delivery.data)
        return isinstance(room, str) and "@" in room and delivery.handler.type not in HERE

    async def run(self, deliveries: list[Delivery]) -> list[Outcome | Exception]:
        results: list[Outcome | Exception] = []
        for home, group in _by_home(deliveries):
            results.extend(await self.run_at(home, group))
        return results

    async def run_at(self, home: str, deliveries: list[Delivery]) -> list[Outcome | Exception]:
        handler = deliveries[0].handler
        if handler.type not in CARRIED:
            return [Forbidden(f"{handler.type} is not carried to a room's home deployment") for _ in deliveries]
        if handler.type == "room.members" and getattr(deliveries[0].data, "after", None) is not None:
            # The home orders its members by its own ids, which this deployment does not know for all of them.
            return [
                Invalid("room.members of a room of another deployment answers its first page only") for _ in deliveries
            ]
        gateway = runtime().gateway
        results: list[Outcome | Exception | None] = [None] * len(deliveries)
        if handler.exactly_once:
            for i, answer in (await gateway.run(_recorded, deliveries)).items():
                results[i] = answer
        todo = [i for i, result in enumerate(results) if result is None]
        if handler.type == "room.join":
            # Before the home makes the membership: from then on it pushes the room's
            # changes here, and a replica takes changes only of the rooms it has.
            for i in todo:
                slug, _ = home_of(room_of(deliveries[i].data))  # type: ignore[misc]
                await gateway.run(replica_room, slug, home)
        if todo:
            done = await carry(home, [deliveries[i] for i in todo], gateway)
            for i, result in zip(todo, done):
                results[i] = result
        return results  # type: ignore[return-value]


def _by_home(deliveries: list[Delivery]) -> Iterator[tuple[str, list[Delivery]]]:
    """Consecutive deliveries by the home of their room, in order."""
    for home, group in groupby(deliveries, key=lambda d: home_of(room_of(d.data))[1]):  # type: ignore[index]
        yield home, list(group)


def _recorded(deliveries: list[Delivery]) -> dict[int, Outcome | CommandError]:
    """The answers of the deliveries whose command has a record here (acked by its home before)."""
    user = deliveries[0].user
    ids = {d.command.id for d in deliveries}
    found = dict(
        (command_id, Stored(fingerprint, result))
        for command_id, fingerprint, result in CommandRecord.objects.filter(user=user, command_id__in=ids).values_list(
            "command_id", "fingerprint", "result"
        )
    )
    return {
        i: replay_or_refuse(found[d.command.id], d.fingerprint, source="database")
        for i, d in enumerate(deliveries)
        if d.command.id in found
    }


async def carry(home: str, deliveries: list[Delivery], gateway: Gateway) -> list[Outcome | Exception]:
    """The deliveries carried to `home` in one request: each one's answer, as this deployment gives it."""
    user = deliveries[0].user
    commands = [
        {"id": d.command.id, "t": d.command.t, "d": {**d.command.d, "room": home_of(room_of(d.data))[0]}}  # type: ignore[index]
        for d in deliveries
    ]
    try:
        answer = await call(
            home,
            "/federation/commands",
            {"user": {"id": str(user.pk), "name": display_name(user)}, "commands": commands},
        )
        acks = answer.get("acks")
        if not isinstance(acks, list) or len(acks) != len(deliveries):
            raise PeerUnavailable("the acks do not match the commands")
    except PeerUnavailable as exc:
        log.warning("commands on rooms of %s: %s", home, exc)
        return [Unavailable() for _ in deliveries]
    found = federation()
    assert found is not None
    results: list[Outcome | Exception] = []
    for delivery, ack in zip(deliveries, acks):
        results.append(await answered(delivery, ack, home, found.node, gateway))
    return results


def refusal(ack: dict[str, Any]) -> CommandError:
    given = ack.get("error")
    error: dict[str, Any] = given if isinstance(given, dict) else {}
    cls = REFUSALS.get(str(error.get("code")), Unavailable)
    extra = {"retry_after": error["retry_after"]} if isinstance(error.get("retry_after"), (int, float)) else {}
    message = error.get("message") if isinstance(error.get("message"), str) else None
    return cls(message, **extra)


async def answered(delivery: Delivery, ack: Any, home: str, own: str, gateway: Gateway) -> Outcome | CommandError:
    """The home's ack of `delivery`, as its outcome here."""
    if not isinstance(ack, dict) or ack.get("id") != delivery.command.id:
        return Unavailable()
    if ack.get("ok") is not True or not isinstance(ack.get("d"), dict):
        return refusal(ack)
    data = await gateway.run(here, ack["d"], home, own)
    if delivery.handler.exactly_once:
        # In its record's order: a retry answered from the record here reads as this answer.
        data = in_record_order(data)
    outcome = Outcome(data=data, dup=bool(ack.get("dup")), source="home" if ack.get("dup") else None)
    kind = delivery.handler.type
    if kind == "room.join":
        from .joins import joined  # joins.py builds on this module

        return await joined(delivery, outcome, home, gateway)
    if kind == "room.leave":
        await gateway.run(_left, delivery.user, data["room"])
        # The user's sockets here stop hearing the room, as after a leave of one of ours.
        outcome.to_users.append((delivery.user.pk, None, left_frame(data["room"], delivery.user, None)))
    if delivery.handler.exactly_once:
        await gateway.run(_record, delivery, data)
    return outcome


def here(d: dict[str, Any], home: str, own: str) -> dict[str, Any]:
    """An ack's `d` from `home` as this deployment says it: its room's address, its users' ids here."""
    d = dict(d)
    if isinstance(d.get("room"), str):
        d["room"] = replica_name(d["room"], home)
    members = [entry for entry in d.get("members") or () if isinstance(entry, dict)]
    owner = identity_of(d.get("owner"))
    identities = [i for i in (identity_of(entry.get("user")) for entry in members) if i is not None]
    users = local_users(identities + ([owner] if owner else []), own)
    mapped = []
    for entry in members:
        identity = identity_of(entry.get("user"))
        user = users.get(identity[:2]) if identity else None
        if user is None:
            continue
        entry = {**entry, "user": user.pk, "node": identity[0]}  # type: ignore[index]
        if identity[0] == own:  # type: ignore[index]
            # Whether one of ours is online is known here, not at the home.
            entry.pop("online", None)
        mapped.append(entry)
    if "members" in d:
        d["members"] = mapped
    if "owner" in d:
        d["owner"] = users[owner[:2]].pk if owner and owner[:2] in users else None
    return d


def _record(delivery: Delivery, data: dict[str, Any]) -> None:
    """This deployment's record of a command its room's home acked `ok` (a concurrent retry's may be there)."""
    try:
        CommandRecord.objects.create(
            user=delivery.user,
            command_id=delivery.command.id,
            type=delivery.handler.type,
            fingerprint=delivery.fingerprint or "",
            result=data,
        )
    except IntegrityError:
        pass


def _left(user: Any, room: str) -> None:
    Membership.objects.filter(room__slug=room, user=user).delete()
