"""`python manage.py messaging_post --room R --as USERNAME --id ID TEXT`: post into a room, exactly once.

For scripts and system messages. The id makes a rerun safe: the same
`--as` and `--id` post once however often the command runs (a cron job
retried, a deploy step run twice), and a rerun prints the original ack.
The user joins the room first (a join is safe to repeat). Exit status: 0
when the post is stored (or was already), 1 when it is refused.
"""

from __future__ import annotations

import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from messaging.core.exceptions import BadFrame
from messaging.core.protocol import AckFrame, encode
from messaging.transport.submitting import submit


class Command(BaseCommand):
    help = "Post TEXT into a room as USERNAME, once per --id (the room's sockets get it live)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("text")
        parser.add_argument("--room", required=True)
        parser.add_argument("--as", dest="username", required=True, metavar="USERNAME")
        parser.add_argument(
            "--id",
            dest="command_id",
            required=True,
            metavar="ID",
            help="the post's id, 1-64 of A-Z a-z 0-9 _ -: the same id posts once",
        )

    def handle(self, *args: Any, text: str, room: str, username: str, command_id: str, **options: Any) -> None:
        users = get_user_model()
        try:
            user = users.objects.get(**{users.USERNAME_FIELD: username})
        except users.DoesNotExist:
            raise CommandError(f"no user {username!r}") from None
        joined = submit(user, "room.join", {"room": room})
        if not joined["ok"]:
            self._refused(joined)
        try:
            ack = submit(user, "room.post", {"room": room, "body": text}, id=command_id)
        except BadFrame as exc:
            raise CommandError(f"--id: {exc.message}") from None
        if not ack["ok"]:
            self._refused(ack)
        self.stdout.write(encode(ack))

    def _refused(self, ack: AckFrame) -> None:
        self.stdout.write(encode(ack))
        error = ack["error"]
        self.stderr.write(f"refused: {error['code']}: {error['message']}")
        sys.exit(1)
