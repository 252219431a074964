"""`python manage.py messaging_token USERNAME [--name NAME]`: a new API token for a user, printed once.

Only the token's hash is stored: lose the printed token and make a new one.
`--revoke PREFIX` instead revokes the user's active tokens that begin with
PREFIX (as the admin shows them), or the one token given whole.
"""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from messaging.models import ApiToken
from messaging.transport.tokens import SHOWN, create_token, digest


class Command(BaseCommand):
    help = "Create an API token for USERNAME and print it once (it is stored hashed), or revoke tokens."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="what the token is for, shown in the admin")
        parser.add_argument("--revoke", metavar="PREFIX", help="revoke the user's active tokens that begin with PREFIX")

    def handle(self, *args, username: str, name: str, revoke: str | None, **options) -> None:
        users = get_user_model()
        try:
            user = users.objects.get(**{users.USERNAME_FIELD: username})
        except users.DoesNotExist:
            raise CommandError(f"no user {username!r}") from None
        if revoke is not None:
            active = ApiToken.objects.filter(user=user, revoked_at__isnull=True)
            # The whole token, or the first characters the admin shows.
            tokens = list(active.filter(digest=digest(revoke)) if len(revoke) > SHOWN
                          else active.filter(prefix__startswith=revoke))
            if not revoke or not tokens:
                raise CommandError(f"no active token of {username!r} begins with {revoke!r}")
            for token in tokens:
                token.revoke()
            self.stderr.write(f"revoked {len(tokens)} token(s)")
            return
        try:
            _, token = create_token(user, name[:64])
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        # The token alone on stdout, for scripts; the warning on stderr.
        self.stdout.write(token)
        self.stderr.write("Shown this once; only its hash is stored.")
