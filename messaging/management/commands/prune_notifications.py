"""Delete mentions (`Notification`) older than `NOTIFICATION_RETENTION`.

Each mention keeps a copy of the message's text for the page's badge and the
e-mails; without this command they stay for as long as users mention each
other. Read or not, e-mailed or not: past the retention a mention is old
news (a digest waits an hour at most).
"""

from __future__ import annotations

from datetime import datetime

from messaging.events.models import Notification
from messaging.ops.retention import RetentionCommand, delete_in_batches


class Command(RetentionCommand):
    help = "Delete mentions older than MESSAGING['NOTIFICATION_RETENTION']."
    retention_setting = "NOTIFICATION_RETENTION"
    batch_default = 5000
    batch_help = "rows per DELETE, so no lock is held long"

    def prune(self, cutoff: datetime, batch: int, dry_run: bool) -> None:
        old = Notification.objects.filter(created_at__lt=cutoff)
        if dry_run:
            self.stdout.write(f"would delete {old.count()} mentions from before {cutoff.isoformat()}")
            return
        deleted = delete_in_batches(old, batch, "created_at", "pk")
        self.stdout.write(f"deleted {deleted} mentions from before {cutoff.isoformat()}")
