"""Clear the bodies an edit replaced once they are older than `EDIT_HISTORY_RETENTION`.

The version rows stay (the admin shows when each edit was made); only the
old text goes. With the setting at 0 (the default: no history is kept) it
clears every body kept while history was on. Deletes clear a message's
history at once, without this command.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from messaging.conf import get_settings
from messaging.models import MessageVersion
from messaging.ops.retention import RetentionCommand


class Command(RetentionCommand):
    help = "Clear edit history bodies older than MESSAGING['EDIT_HISTORY_RETENTION'] (all of them at 0)."
    retention_setting = "EDIT_HISTORY_RETENTION"
    batch_default = 5000
    batch_help = "rows per UPDATE, so no lock is held long"

    def handle(self, *args: Any, older_than: int | None, batch: int, dry_run: bool, **options: Any) -> None:
        if older_than is None and get_settings().EDIT_HISTORY_RETENTION == 0 and batch > 0:
            self.prune(timezone.now(), batch, dry_run)
            return
        super().handle(*args, older_than=older_than, batch=batch, dry_run=dry_run, **options)

    def prune(self, cutoff: datetime, batch: int, dry_run: bool) -> None:
        old = MessageVersion.objects.filter(at__lt=cutoff, previous_body__isnull=False)
        if dry_run:
            self.stdout.write(f"would clear {old.count()} edit history bodies from before {cutoff.isoformat()}")
            return
        cleared = 0
        while ids := list(old.order_by("pk").values_list("pk", flat=True)[:batch]):
            cleared += MessageVersion.objects.filter(pk__in=ids).update(previous_body=None)
        self.stdout.write(f"cleared {cleared} edit history bodies from before {cutoff.isoformat()}")
