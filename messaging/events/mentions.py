"""Mentions: a message with `@name` of a room member notifies that member once.

`notify` is a consumer group's handler (`messaging_consume
messaging.events.mentions.notify --group mentions`) in the seen-set shape
(its e-mail cannot join a transaction):

1. one `Notification` per member mentioned, under a unique `(user, event_id)`,
   so a redelivery adds none (the page shows the unread ones as a badge);
2. to each of them with no socket open on any server process (the hub's
   per-user Pub/Sub channel has no subscriber) and an address, one e-mail
   through Django's e-mail backend, with `Message-ID: <event_id@host>`,
   unless they already had `MENTION_EMAILS_PER_HOUR` in the last hour: then
   the mention waits for a digest, one e-mail of all that waited, which the
   group's consumers send from their own loop when the hour has room
   (mention_emails.py says how each goes out once).

A member is someone the message was sent to: a member of the room (its
`Membership`) who joined before the message; a user who joined after it
was posted never got it. A name is a member's username or
display name (first name for guests), in any case; the sender mentioning
themself is not notified. At most `MENTIONS_PER_MESSAGE` names of one
message are looked up.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Lower

from ..conf import get_settings
from .consumers import also_every, outside_database
from .mention_emails import DIGEST_CHECK_EVERY, email_mention, send_due_digests
from .models import Notification
from .redaction import message_deleted

log = logging.getLogger(__name__)

# `@` not inside a word or an address: "@ana," and "(@ana)", not "x@ana.org".
MENTION = re.compile(r"(?<![\w@.])@([\w][\w.-]{0,149})")


def mentioned_names(body: str, limit: int) -> list[str]:
    names: list[str] = []
    for match in MENTION.finditer(body):
        name = match.group(1).rstrip(".-").lower()
        if name and name not in names:
            names.append(name)
            if len(names) == limit:
                break
    return names


def mentioned_members(room: str, seq: int, names: list[str], sender_id: Any) -> list[Any]:
    """The users named among the message's recipients: members who joined before message `seq`."""
    from ..models import Membership

    return [
        m.user
        for m in Membership.objects.filter(room__slug=room, joined_seq__lt=seq)
        .select_related("user")
        .annotate(username_l=Lower("user__username"), first_l=Lower("user__first_name"))
        .filter(Q(username_l__in=names) | Q(first_l__in=names))
        .exclude(user_id=sender_id)
    ]


@outside_database
@also_every(DIGEST_CHECK_EVERY, send_due_digests)
def notify(event: dict[str, Any]) -> None:
    if event["type"] != "message.posted":
        return
    data = event["data"]
    names = mentioned_names(data["body"], get_settings().MENTIONS_PER_MESSAGE)
    if not names:
        return
    users = mentioned_members(event["room"], data["seq"], names, data["sender"]["id"])
    if not users:
        return
    with transaction.atomic():
        if message_deleted(event):  # since the stream's copy was made: no mention of it is kept
            return
        Notification.objects.bulk_create(
            [
                Notification(
                    user=user,
                    event_id=event["event_id"],
                    room=event["room"],
                    seq=data["seq"],
                    sender_name=data["sender"]["name"],
                    body=data["body"],
                )
                for user in users
            ],
            ignore_conflicts=True,
        )
    # Pending: new. Sending: its e-mail was decided and maybe sent when a consumer crashed (sent again, same Message-ID).
    # By its message first: (room, seq) is indexed, the event's id alone is not.
    for notification in Notification.objects.filter(
        room=event["room"],
        seq=data["seq"],
        event_id=event["event_id"],
        email__in=[Notification.Email.PENDING, Notification.Email.SENDING],
        digest__isnull=True,
    ).select_related("user"):
        email_mention(notification)
