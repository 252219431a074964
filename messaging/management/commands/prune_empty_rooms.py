"""Delete the rooms that were never used: no message ever, old, and nobody joined them lately.

Anyone may make a room (a `room.join` of a new slug, `room.create`,
`dm.open`), and the limits per user and per address only slow that down:
without this command every room ever made stays. A room is *unused and
empty* when all of these hold, read conservatively:

- it never had a message, nor any other change: `last_seq` and `last_rev`
  are 0 and no message row names it;
- it was created more than `EMPTY_ROOM_RETENTION` ago (30 days by default);
- no member joined it, and nobody was invited to it, within that time.

Such a room goes with what hangs on it: its memberships (and their
watermark moves, all at 0), its invitations (pending or declined), its
direct-conversation pair and anything else whose foreign key cascades; the
moderation audit keeps its rows, with the room's slug. Its slug is free again: the next `room.join` of it creates a
new public room, and the next `dm.open` of the pair a new direct room. A
private room that was made and never written in loses its owner and
members with it.

Each batch locks its rooms' rows (skipping any locked now: a post or a
join is at work there) and checks them again under the lock, so a post or
join committed by then keeps its room; one that comes later finds no room
and is refused (`forbidden`, or `unavailable` for a join, whose retry makes
the room again).
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet

from messaging.models import Invitation, Membership, Message, Room
from messaging.ops.retention import RetentionCommand


def unused_empty_rooms(cutoff: datetime) -> QuerySet[Room]:
    """The rooms with no message ever, created before `cutoff`, that nobody joined or was invited to since."""
    return (
        Room.objects.filter(last_seq=0, last_rev=0, created_at__lt=cutoff)
        .filter(~Exists(Message.objects.filter(room=OuterRef("pk"))))
        .filter(~Exists(Membership.objects.filter(room=OuterRef("pk"), joined_at__gte=cutoff)))
        .filter(~Exists(Invitation.objects.filter(room=OuterRef("pk"), created_at__gte=cutoff)))
    )


class Command(RetentionCommand):
    help = (
        "Delete rooms that never had a message, made more than MESSAGING['EMPTY_ROOM_RETENTION'] ago "
        "and joined by or invited nobody since."
    )
    retention_setting = "EMPTY_ROOM_RETENTION"
    batch_default = 500
    batch_help = "rooms per transaction, so no lock is held long"

    def prune(self, cutoff: datetime, batch: int, dry_run: bool) -> None:
        if dry_run:
            self.stdout.write(
                f"would delete {unused_empty_rooms(cutoff).count()} unused empty rooms "
                f"created before {cutoff.isoformat()}"
            )
            return
        deleted, after = 0, 0
        # In key order, each batch after the last: one pass over the rooms, whatever is kept.
        while ids := list(
            unused_empty_rooms(cutoff).filter(pk__gt=after).order_by("pk").values_list("pk", flat=True)[:batch]
        ):
            after = ids[-1]
            with transaction.atomic():
                locked = list(
                    unused_empty_rooms(cutoff)
                    .filter(pk__in=ids)
                    .select_for_update(skip_locked=True)
                    .values_list("pk", flat=True)
                )
                deleted += Room.objects.filter(pk__in=locked).delete()[1].get(Room._meta.label, 0)
        self.stdout.write(f"deleted {deleted} unused empty rooms created before {cutoff.isoformat()}")
