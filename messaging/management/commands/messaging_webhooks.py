"""`python manage.py messaging_webhooks`: send the due webhook deliveries (messaging/events/webhooks.py).

Runs until SIGTERM or SIGINT. Several may run: each leases its own deliveries.
"""

from __future__ import annotations

import signal
import time
from typing import Any

from django.core.management.base import BaseCommand
from django.db import DatabaseError, close_old_connections

from messaging.conf import get_settings
from messaging.events import webhooks

# Seconds between prunes of finished deliveries.
PRUNE_EVERY = 300.0


class Command(BaseCommand):
    help = "POST each webhook delivery that is due, signed, retried with backoff until delivered or dead."

    def handle(self, *args: Any, **options: Any) -> None:
        stopping = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stopping.append(True))
        pruned_at = 0.0
        while not stopping:
            conf = get_settings()
            close_old_connections()
            try:
                sent = webhooks.deliver_due()
                if time.monotonic() - pruned_at > PRUNE_EVERY:
                    webhooks.prune(conf.EVENTS_RETENTION)
                    pruned_at = time.monotonic()
            except DatabaseError as exc:
                self.stderr.write(f"webhooks: database: {exc} (retrying)")
                sent = 0
            if sent < conf.WEBHOOK_BATCH:
                time.sleep(conf.EVENTS_POLL_INTERVAL)
