"""`python manage.py messaging_token USERNAME [--name NAME] [--expires-in DURATION]`: a new API token for a user, printed once.

Only the token's hash is stored: lose the printed token and make a new one.
`--expires-in` (`90d`, `12h`, `30m`, `3600s`, or an ISO 8601 duration such
as `P30D`) makes a token that signs nobody in after that time, and whose
sockets are then closed. `--revoke PREFIX` instead revokes the user's active
tokens that begin with PREFIX (as the admin shows them), or the one token
given whole.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_duration

from messaging.models import ApiToken
from messaging.transport.tokens import SHOWN, create_token, digest

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# Far enough for any rotation schedule, and far from the dates' overflow.
LONGEST = timedelta(days=3650)


def duration(text: str) -> timedelta:
    """`90d`, `12h`, `30m`, `3600s`, `2w`, or what Django's `parse_duration` reads (`P30D`, `1 12:00:00`)."""
    short = re.fullmatch(r"\s*(\d{1,9})\s*([smhdw])\s*", text)
    try:
        given = timedelta(seconds=int(short[1]) * UNITS[short[2]]) if short else parse_duration(text.strip())
    except OverflowError:
        given = None
    if given is None:
        raise CommandError(f"--expires-in {text!r}: give a duration such as 90d, 12h, 30m, 3600s or P30D")
    if not timedelta(0) < given <= LONGEST:
        raise CommandError(f"--expires-in {text!r}: more than nothing and at most {LONGEST.days} days")
    return given


class Command(BaseCommand):
    help = "Create an API token for USERNAME and print it once (it is stored hashed), or revoke tokens."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="what the token is for, shown in the admin")
        parser.add_argument(
            "--expires-in",
            metavar="DURATION",
            help="the token signs nobody in after this long: 90d, 12h, 30m, 3600s, P30D",
        )
        parser.add_argument("--revoke", metavar="PREFIX", help="revoke the user's active tokens that begin with PREFIX")

    def handle(
        self, *args: Any, username: str, name: str, expires_in: str | None, revoke: str | None, **options: Any
    ) -> None:
        expires_at = timezone.now() + duration(expires_in) if expires_in is not None else None
        users = get_user_model()
        try:
            user = users.objects.get(**{users.USERNAME_FIELD: username})
        except users.DoesNotExist:
            raise CommandError(f"no user {username!r}") from None
        if revoke is not None:
            active = ApiToken.objects.filter(user=user, revoked_at__isnull=True)
            # The whole token, or the first characters the admin shows.
            tokens = list(
                active.filter(digest=digest(revoke))
                if len(revoke) > SHOWN
                else active.filter(prefix__startswith=revoke)
            )
            if not revoke or not tokens:
                raise CommandError(f"no active token of {username!r} begins with {revoke!r}")
            for token in tokens:
                token.revoke()
            self.stderr.write(f"revoked {len(tokens)} token(s)")
            return
        try:
            _, secret = create_token(user, name[:64], expires_at=expires_at)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        # The token alone on stdout, for scripts; the warning on stderr.
        self.stdout.write(secret)
        until = f" It expires at {expires_at.isoformat(timespec='seconds')}." if expires_at else ""
        self.stderr.write("Shown this once; only its hash is stored." + until)
