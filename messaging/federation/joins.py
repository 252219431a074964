"""A join of a room of another deployment (`room.join` of `slug@node`): the membership is the home's, the backlog the replica's.

The home applied the join (the user is one of its room's members) and acked
it (routing.py). Then, here:

1. the replica of the room and the user's membership of it are made, if
   they are new: the replica's sockets, history pages and `rooms.list`
   know the user is in it;
2. the replica catches up to the home's `last_rev`, for at most
   `FEDERATION_JOIN_WAIT` seconds (catchup.py): a first join fetches the
   room; later ones find it there;
3. the join runs on the replica as on any room of this deployment (its
   backlog by `since`, `since_rev` or the recent messages, with what the
   apps beside the chat send), and its ack takes from the home's what only
   the home knows: the members (with their `online`), `members_total`,
   `unread`, `first_unread`, `private` and `owner`.

The ack's `last_seq`, `last_rev` and `rev_upto` are the replica's, which
its backlog matches: what came after them arrives live (the socket
subscribed first) or by a later join.
"""

from __future__ import annotations

import time
from typing import Any

from django.db import transaction

from ..chat.sizes import join_ack_that_fits
from ..conf import get_settings
from ..core.apply import apply_once
from ..core.exceptions import CommandError, Unavailable
from ..core.gateway import Gateway
from ..core.outcomes import Delivery, Outcome
from ..models import Membership
from .addresses import home_of
from .applying import replica_room
from .catchup import catch_up

# What the ack takes from the home's.
FROM_HOME = ("members", "members_total", "unread", "first_unread", "private", "owner")


def member_of_replica(slug: str, home: str, user: Any) -> None:
    with transaction.atomic():
        room = replica_room(slug, home, lock=True)
        Membership.objects.get_or_create(room=room, user=user, defaults={"joined_seq": room.last_seq})


async def joined(delivery: Delivery, at_home: Outcome, home: str, gateway: Gateway) -> Outcome | CommandError:
    """The join's outcome here, once the home acked it with `at_home`."""
    slug, _ = home_of(at_home.data["room"])  # type: ignore[misc]
    await gateway.run(member_of_replica, slug, home, delivery.user)
    last_rev = at_home.data.get("last_rev")
    if isinstance(last_rev, int):
        await catch_up(home, slug, until=last_rev, deadline=time.monotonic() + get_settings().FEDERATION_JOIN_WAIT)
    try:
        here = await apply_once(delivery, gateway)
    except CommandError as exc:
        return exc
    except Exception:
        return Unavailable()
    ack = dict(here.data)
    ack.update({key: at_home.data[key] for key in FROM_HOME if key in at_home.data})
    here.data = join_ack_that_fits(ack, delivery.command.id, delivery.user.pk)
    return here
