"""Remove uploads never posted, once `UPLOAD_RETENTION` (a day) old, and files no upload names.

PROTOCOL.md 1.2: "Uploads never posted are removed after a day." Each goes
with its row (in batches, skipping rows a post holds: a post that attaches
one now keeps it) and its file once that batch has committed
(messaging/files/storage.py). Then the storage's folder of uploads is swept
for files no row names that are older than the retention: a removal that
failed after its commit (the storage away), a process that died while it
received a file.
"""

from __future__ import annotations

from datetime import datetime

from messaging.files.models import Upload
from messaging.files.storage import sweep_orphans
from messaging.ops.retention import RetentionCommand, delete_in_batches


class Command(RetentionCommand):
    help = "Remove uploads not posted within MESSAGING['UPLOAD_RETENTION'], and files no upload names."
    retention_setting = "UPLOAD_RETENTION"
    batch_default = 1000
    batch_help = "uploads per DELETE, so no lock is held long"

    def prune(self, cutoff: datetime, batch: int, dry_run: bool) -> None:
        pending = Upload.objects.filter(room__isnull=True, created_at__lt=cutoff)
        if dry_run:
            orphans = sweep_orphans(cutoff, dry_run=True)
            self.stdout.write(
                f"would remove {pending.count()} uploads not posted since {cutoff.isoformat()}"
                f" and {orphans} files no upload names"
            )
            return
        deleted = delete_in_batches(pending, batch, "created_at", "pk")
        orphans = sweep_orphans(cutoff)
        self.stdout.write(
            f"removed {deleted} uploads not posted since {cutoff.isoformat()} and {orphans} files no upload names"
        )
