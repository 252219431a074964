"""`python manage.py messaging_relay`: publish the outbox's events (messaging/events/relay.py).

Runs until SIGTERM or SIGINT, which finish the batch in flight. Start as many
as you like; they share the outbox's partitions.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from django.core.management.base import BaseCommand

from messaging.events.settings import configured_relay


class Command(BaseCommand):
    help = "Publish committed events to Redis Streams or NATS JetStream, in order per room, at least once."

    def handle(self, *args: Any, **options: Any) -> None:
        asyncio.run(self.relay())

    async def relay(self) -> None:
        relay = configured_relay()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, relay.stop)
        await relay.run()
