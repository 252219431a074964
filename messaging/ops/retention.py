"""What the app's pruning commands share: a retention from settings, overridable, a batch size, a dry run, batched deletes."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from messaging.conf import get_settings


class RetentionCommand(BaseCommand):
    """A command that deletes rows older than the `MESSAGING` option `retention_setting`, in batches."""

    retention_setting: str
    batch_default: int
    batch_help: str

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than", type=int, metavar="SECONDS", help=f"override {self.retention_setting}")
        parser.add_argument("--batch", type=int, default=self.batch_default, help=self.batch_help)
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing")

    def handle(self, *args: Any, older_than: int | None, batch: int, dry_run: bool, **options: Any) -> None:
        retention = getattr(get_settings(), self.retention_setting) if older_than is None else older_than
        if retention <= 0 or batch <= 0:
            raise CommandError("the retention and the batch size must be positive")
        self.prune(timezone.now() - timedelta(seconds=retention), batch, dry_run)

    def prune(self, cutoff: datetime, batch: int, dry_run: bool) -> None:
        raise NotImplementedError


def delete_in_batches(rows: QuerySet[Any], batch: int, *order: str) -> int:
    """Delete `rows`, `batch` at a time in `order` (the key's by default), each DELETE short; how many went.

    A row another transaction holds is left for the next run (SKIP LOCKED):
    a prune never waits for one while holding others, so it cannot meet a
    writer that takes several of them (a message's delete blanking its
    mentions, messaging/events/redaction.py) in a cycle.
    """
    deleted = 0
    while True:
        with transaction.atomic():
            ids = list(
                rows.order_by(*(order or ("pk",)))
                .select_for_update(skip_locked=True)
                .values_list("pk", flat=True)[:batch]
            )
            if not ids:
                return deleted
            deleted += rows.model.objects.filter(pk__in=ids).delete()[0]
