"""Delete watermark moves older than `RECEIPT_TIMES_RETENTION`.

A move is written by every receipt that moves a member's watermarks, so the
table grows with messages times recipients. Moves only date receipts: when
each recipient's watermark first reached a seq, as the admin shows per
message. Watermarks, message states and their times stay.

A membership keeps the watermarks of its newest pruned move (`pruned_delivered`,
`pruned_read`), so for the seqs those moves covered the admin says the time
is not recorded, instead of dating them by the first move left, a later
receipt. Each batch of memberships is pruned under their row locks, the lock
a receipt takes before it writes a move.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import F, Max, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce, Greatest

from messaging.models import Membership, WatermarkMove
from messaging.ops.retention import RetentionCommand


class Command(RetentionCommand):
    help = "Delete watermark moves (per-recipient receipt times) older than MESSAGING['RECEIPT_TIMES_RETENTION']."
    retention_setting = "RECEIPT_TIMES_RETENTION"
    batch_default = 1000
    batch_help = "memberships per transaction, so no lock is held long"

    def prune(self, cutoff: datetime, batch: int, dry_run: bool) -> None:
        old = WatermarkMove.objects.filter(at__lt=cutoff)
        if dry_run:
            self.stdout.write(f"would delete {old.count()} watermark moves made before {cutoff.isoformat()}")
            return
        deleted = 0
        after = 0
        # Memberships in key order, a batch at a time: each batch finds its
        # moves through the (membership, watermark) indexes, not a table scan.
        while ids := list(Membership.objects.filter(pk__gt=after).order_by("pk").values_list("pk", flat=True)[:batch]):
            after = ids[-1]
            deleted += prune_memberships(old, ids)
        self.stdout.write(f"deleted {deleted} watermark moves made before {cutoff.isoformat()}")


def prune_memberships(old: QuerySet[WatermarkMove], ids: list[int]) -> int:
    """Delete the `old` moves of the memberships `ids`, keeping their newest pruned watermarks."""
    # Only the memberships that have old moves are locked and written.
    having = list(old.filter(membership__in=ids).values_list("membership", flat=True).distinct().order_by("membership"))
    if not having:
        return 0
    with transaction.atomic():
        # Locked in (room, user) order, as a batch of receipts locks them
        # (migration 0016): the two cannot wait on each other in a cycle.
        list(
            Membership.objects.select_for_update()
            .filter(pk__in=having)
            .order_by("room_id", "user_id")
            .values_list("pk", flat=True)
        )
        pruned = old.filter(membership__in=having)

        def newest(watermark: str) -> Greatest:
            # Watermarks only grow, so the newest pruned move has the largest.
            top = pruned.filter(membership=OuterRef("pk")).values("membership").annotate(top=Max(watermark))
            return Greatest(F(f"pruned_{watermark}"), Coalesce(Subquery(top.values("top")), 0))

        Membership.objects.filter(pk__in=having).update(
            pruned_delivered=newest("delivered"), pruned_read=newest("read")
        )
        deleted: int = pruned.delete()[0]
        return deleted
