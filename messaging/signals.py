"""Django signals for host code: what the chat's commands changed, sent once each change commits.

Connect a receiver as to any Django signal (in an `AppConfig.ready`)::

    from django.dispatch import receiver
    from messaging.signals import message_posted

    @receiver(message_posted)
    def on_post(sender, room, seq, user, message, command_id, **kwargs):
        ...

Each is sent after the transaction of the change commits (Django's
`transaction.on_commit`), once per change: never for a copy of a command
that was applied before (answered from its record), never for a change that
rolled back or was refused. Every signal's `sender` is the model of what
changed (`Message` or `Membership`), and every keyword below is always
passed:

- `message_posted`: `room` (slug), `seq`, `user` (the sender), `command_id`,
  `message` (the `msg` frame's `d`: room, seq, id, sender, body, at,
  version, rev, files where it has any).
- `message_edited`: `room`, `seq`, `user` (who edited it), `command_id`,
  `message` (the `msg.edit` frame's `d`).
- `message_deleted`: `room`, `seq`, `user` (who deleted it), `command_id`,
  `message` (the `msg.delete` frame's `d`).
- `member_joined`: `room`, `user` (the new member), `by` (None: the user
  joined, opened a direct room or created the room), `command_id`.
- `member_left`: `room`, `user` (the former member), `by` (None when they
  left, else the moderator who removed them), `command_id`.

Receivers run on the database thread that applied the command, before its
ack is sent: keep them short (hand longer work to a task queue). A
receiver's exception is logged (logger `messaging.signals`) and changes
nothing of the command. With no receiver connected a signal costs nothing.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.db import transaction
from django.dispatch import Signal

log = logging.getLogger(__name__)

message_posted = Signal()
message_edited = Signal()
message_deleted = Signal()
member_joined = Signal()
member_left = Signal()


def send_on_commit(signal: Signal, sender: type, **kwargs: Any) -> None:
    """Send `signal` once the caller's transaction commits (at once in autocommit); nothing where it rolls back."""
    if signal.has_listeners(sender):
        transaction.on_commit(partial(send_now, signal, sender, kwargs))


def send_now(signal: Signal, sender: type, kwargs: dict[str, Any]) -> None:
    """Send `signal` to every receiver; one's exception is logged and the others still run."""
    for receiver, result in signal.send_robust(sender, **kwargs):
        if isinstance(result, Exception):
            log.error(
                "receiver %r of a messaging signal failed",
                receiver,
                exc_info=(type(result), result, result.__traceback__),
            )
