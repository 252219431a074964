"""Mentions: a message with `@name` of a room member notifies that member once.

`notify` is a consumer group's handler (`messaging_consume
messaging.events.mentions.notify --group mentions`) in the seen-set shape
(its e-mail cannot join a transaction):

1. one `Notification` per member mentioned, under a unique `(user, event_id)`,
   so a redelivery adds none (the page shows the unread ones as a badge);
2. to each of them with no socket open on any server process (the hub's
   per-user Pub/Sub channel has no subscriber) and an address, one e-mail
   through Django's e-mail backend, with `Message-ID: <event_id@host>`, marked
   sent right after. A crash between the two sends it again with the same
   Message-ID, which mail systems treat as the same message; the inbox record
   written after the handler returns stops every later redelivery.

A name is a member's username or display name (first name for guests), in
any case; the sender mentioning themself is not notified. At most
`MENTIONS_PER_MESSAGE` names of one message are looked up.
"""
from __future__ import annotations

import logging
import re

import redis

from django.conf import settings
from django.core.mail import EmailMessage
from django.core.mail.utils import DNS_NAME
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Lower

from ..conf import get_settings
from .consumers import outside_database
from .models import Notification

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


def mentioned_members(room: str, names: list[str], sender_id) -> list:
    from ..models import Membership

    return [m.user for m in Membership.objects.filter(room__slug=room).select_related("user")
            .annotate(username_l=Lower("user__username"), first_l=Lower("user__first_name"))
            .filter(Q(username_l__in=names) | Q(first_l__in=names)).exclude(user_id=sender_id)]


def online(user_id) -> bool:
    """Whether any server process holds a socket of the user: while it does, it
    subscribes to the user's channel (`fanout.RedisHub.user_channel`). Without
    Redis there is no telling: offline."""
    url = get_settings().REDIS_URL
    if not url:
        return False
    with redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2) as client:
        db = client.connection_pool.connection_kwargs.get("db", 0)
        [(_, count)] = client.pubsub_numsub(f"messaging:{db}:user:{user_id}")
    return count > 0


@outside_database
def notify(event: dict) -> None:
    if event["type"] != "message.posted":
        return
    data = event["data"]
    names = mentioned_names(data["body"], get_settings().MENTIONS_PER_MESSAGE)
    if not names:
        return
    users = mentioned_members(event["room"], names, data["sender"]["id"])
    if not users:
        return
    with transaction.atomic():
        Notification.objects.bulk_create(
            [Notification(user=user, event_id=event["event_id"], room=event["room"], seq=data["seq"],
                          sender_name=data["sender"]["name"], body=data["body"]) for user in users],
            ignore_conflicts=True)
    for notification in Notification.objects.filter(event_id=event["event_id"], email=Notification.Email.PENDING)\
            .select_related("user"):
        email_once(notification, event)


def email_once(notification: Notification, event: dict) -> None:
    user = notification.user
    if not user.email:
        status = Notification.Email.NO_ADDRESS
    elif online(user.pk):
        status = Notification.Email.ONLINE
    else:
        message = EmailMessage(
            subject=f"{notification.sender_name} mentioned you in {notification.room}",
            body=f"{notification.sender_name} in {notification.room}:\n\n{notification.body}\n",
            from_email=settings.DEFAULT_FROM_EMAIL, to=[user.email],
            headers={"Message-ID": f"<{event['event_id']}@{DNS_NAME}>"},
        )
        message.send()  # an SMTP failure raises: the event is retried after the claim time
        status = Notification.Email.SENT
    Notification.objects.filter(pk=notification.pk).update(email=status)
