"""`python manage.py messaging_consume HANDLER --group NAME`: one consumer of a group (messaging/events/consumers.py)."""

from __future__ import annotations

import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.module_loading import import_string

from messaging.events.consumers import consume


class Command(BaseCommand):
    help = "Apply each event of the stream once per group: HANDLER is a dotted path to a callable taking the event."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("handler", help="dotted path to a callable taking one argument, the event (a dict)")
        parser.add_argument("--group", required=True, help="the consumer group's name")
        parser.add_argument(
            "--claim-after",
            type=float,
            default=30.0,
            help="seconds after which entries left pending by a dead consumer are claimed again",
        )
        parser.add_argument("--name", default=None, help="this consumer's name in the group (default host-pid)")

    def handle(
        self, *args: Any, handler: str, group: str, claim_after: float, name: str | None, **options: Any
    ) -> None:
        try:
            function = import_string(handler)
        except ImportError as exc:
            raise CommandError(f"cannot import {handler}: {exc}") from None
        if not callable(function):
            raise CommandError(f"{handler} is not callable")
        if claim_after <= 0:
            raise CommandError("--claim-after must be positive")
        try:
            consumer = consume(function, group=group, claim_after=claim_after, name=name)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: consumer.stop())
        consumer.run()
