"""Delete the durable records of custom command types older than `RECORD_RETENTION`.

A record is what answers a duplicate once Redis has forgotten the command, so
pruning it ends the guarantee for that command: a copy that arrives later is
applied again. Keep the retention longer than any client can go on retrying
(an outbox can survive days of a closed laptop).

`room.post` records are never pruned. The message they answer is kept, and
its unique (sender, client id) constraint would refuse a late retry's insert
with no record left to answer it: that id would get `unavailable` forever.
"""

from __future__ import annotations

from datetime import datetime

from messaging.models import CommandRecord
from messaging.ops.retention import RetentionCommand, delete_in_batches

KEPT_TYPES = frozenset({"room.post"})


class Command(RetentionCommand):
    help = "Delete durable idempotency records of custom command types older than MESSAGING['RECORD_RETENTION']."
    retention_setting = "RECORD_RETENTION"
    batch_default = 5000
    batch_help = "rows per DELETE, so no lock is held long"

    def prune(self, cutoff: datetime, batch: int, dry_run: bool) -> None:
        old = CommandRecord.objects.filter(created_at__lt=cutoff).exclude(type__in=KEPT_TYPES)
        if dry_run:
            self.stdout.write(f"would delete {old.count()} command records created before {cutoff.isoformat()}")
            return
        deleted = delete_in_batches(old, batch)
        kept = ", ".join(sorted(KEPT_TYPES))
        self.stdout.write(
            f"deleted {deleted} command records created before {cutoff.isoformat()} (never pruned: {kept})"
        )
