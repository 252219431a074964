"""Delete the moderation audit's rows older than `MODERATION_RETENTION`.

Every removal, invitation and moderator's delete adds a `ModerationAction`
row, which outlives the room and the users it names: without this command
the audit grows for as long as the rooms are moderated. Keep the retention
as long as your policy keeps an audit (a year by default).
"""

from __future__ import annotations

from datetime import datetime

from messaging.models import ModerationAction
from messaging.ops.retention import RetentionCommand, delete_in_batches


class Command(RetentionCommand):
    help = "Delete moderation audit rows older than MESSAGING['MODERATION_RETENTION']."
    retention_setting = "MODERATION_RETENTION"
    batch_default = 5000
    batch_help = "rows per DELETE, so no lock is held long"

    def prune(self, cutoff: datetime, batch: int, dry_run: bool) -> None:
        old = ModerationAction.objects.filter(at__lt=cutoff)
        if dry_run:
            self.stdout.write(f"would delete {old.count()} moderation actions from before {cutoff.isoformat()}")
            return
        deleted = delete_in_batches(old, batch, "at", "pk")
        self.stdout.write(f"deleted {deleted} moderation actions from before {cutoff.isoformat()}")
