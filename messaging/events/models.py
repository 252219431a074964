"""The events' tables: the outbox, each consumer group's inbox, and dead letters.

They belong to the `messaging` app (its migrations), so a host adds nothing
to `INSTALLED_APPS`; `messaging/models.py` imports them.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from ..conf import get_settings
from .outbound import Refused, destination
from .signatures import new_secret, standard_secret


class Event(models.Model):
    """One effect's event, written in the effect's own transaction (the outbox).

    `position` is the room's event counter (`Room.last_event`), taken under
    the room's row lock in that transaction: gapless per room and in commit
    order, so the committed events of a room are always a prefix of its
    positions, and the relay publishes them in that order without waiting for
    anything. `published_at` is set once a sink has acknowledged the event;
    published rows are pruned after `EVENTS_RETENTION`.
    """

    event_id = models.UUIDField(unique=True)
    type = models.CharField(max_length=64)
    room_id = models.BigIntegerField()
    room = models.CharField(max_length=64)
    position = models.PositiveBigIntegerField()
    data = models.JSONField()
    created_at = models.DateTimeField()
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["room_id", "position"], name="messaging_event_room_position"),
        ]
        indexes = [
            # The relay's queue: only unpublished rows, so it stays as small as the backlog.
            models.Index(
                fields=["id"], name="messaging_event_unpublished", condition=models.Q(published_at__isnull=True)
            ),
            models.Index(
                fields=["published_at"],
                name="messaging_event_published",
                condition=models.Q(published_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.room}#{self.position}"


class InboxRecord(models.Model):
    """An event a consumer group applied, inserted in its handler's transaction:
    its unique constraint is what applies each event once per group."""

    group = models.CharField(max_length=100)
    event_id = models.UUIDField()
    applied_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["group", "event_id"], name="messaging_inbox_group_event")]
        indexes = [models.Index(fields=["applied_at"], name="messaging_inbox_applied")]

    def __str__(self) -> str:
        return f"{self.group}: {self.event_id}"


class DeadLetter(models.Model):
    """An event a consumer group (or a webhook endpoint) gave up on after
    `EVENTS_MAX_ATTEMPTS` failures; kept for an operator, shown in the admin."""

    group = models.CharField(max_length=100)
    event_id = models.UUIDField()
    event = models.JSONField()
    attempts = models.PositiveIntegerField()
    error = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["group", "event_id"], name="messaging_deadletter_group_event")]
        # A message's delete finds the dead letters of its events by their ids (messaging/events/redaction.py).
        indexes = [models.Index(fields=["event_id"], name="messaging_deadletter_by_event")]

    def __str__(self) -> str:
        return f"{self.group}: {self.event_id}"


class WebhookEndpoint(models.Model):
    """A host's endpoint that receives the events, signed with its secret (messaging/events/webhooks.py).

    Saving one checks where its URL leads (outbound.py): a host that resolves
    to a loopback, private, link-local or unspecified address is refused,
    unless `WEBHOOKS_ALLOW_PRIVATE`. Its secret is kept in the Standard
    Webhooks form (signatures.py).
    """

    url = models.URLField(max_length=500, help_text="Where the events are POSTed: a public http(s) address.")
    # `whsec_` + base64 of up to 800 bytes: the form of any secret of 200 characters kept before.
    secret = models.CharField(
        max_length=1100,
        default=new_secret,
        help_text="whsec_ and the key in base64 (Standard Webhooks); any other text is "
        "kept as whsec_ and the base64 of its UTF-8 bytes, the same key.",
    )
    # Empty: every type.
    types = models.JSONField(
        default=list, blank=True, help_text='Event types to send, e.g. ["message.posted"]; empty for all.'
    )
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.url

    def clean(self) -> None:
        super().clean()
        self.check_destination()

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Here as well as in `clean`: code that creates endpoints skips the forms' validation.
        self.check_destination()
        self.secret = standard_secret(self.secret)
        super().save(*args, **kwargs)

    def check_destination(self) -> None:
        """Refuse (ValidationError on `url`) a URL that no delivery could be sent to."""
        try:
            destination(self.url, allow_private=get_settings().WEBHOOKS_ALLOW_PRIVATE)
        except (Refused, OSError, ValueError) as exc:
            raise ValidationError({"url": str(exc)}) from None

    def wants(self, type: str) -> bool:
        return not self.types or type in self.types


class WebhookDelivery(models.Model):
    """One event to one endpoint: pending until a 2xx answer, dead after `WEBHOOK_MAX_ATTEMPTS`."""

    class State(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        DEAD = "dead"

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries", db_index=False)
    event_id = models.UUIDField()
    event = models.JSONField()
    state = models.CharField(max_length=9, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    # When it may be tried next; while an attempt runs, the end of its lease.
    next_attempt_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["endpoint", "event_id"], name="messaging_delivery_event")]
        indexes = [
            models.Index(
                fields=["next_attempt_at"], name="messaging_delivery_due", condition=models.Q(state="pending")
            ),
            models.Index(fields=["finished_at"], name="messaging_delivery_finished"),
            # A message's delete finds the deliveries of its events by their ids
            # (messaging/events/redaction.py): one entry more per delivery, none per post.
            models.Index(fields=["event_id"], name="messaging_delivery_by_event"),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} to {self.endpoint_id}"


class WebhookAttempt(models.Model):
    """One POST of a delivery: at most `WEBHOOK_MAX_ATTEMPTS` per delivery."""

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log")
    at = models.DateTimeField()
    status = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    seconds = models.FloatField()

    def __str__(self) -> str:
        return f"{self.delivery}: {self.status or self.error}"


class Notification(models.Model):
    """A member mentioned (`@name`) in a message: the page's badge, and at most one e-mail
    (its own, or one digest among others: messaging/events/mention_emails.py)."""

    class Email(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        ONLINE = "online"  # a socket was open: the page tells them
        NO_ADDRESS = "no address"
        HELD = "held"  # past the hour's e-mails: waits for a digest
        SENDING = "sending"  # its e-mail is counted in the hour and being sent (again after a crash)

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mentions", db_index=False
    )
    event_id = models.UUIDField()
    room = models.CharField(max_length=64)
    seq = models.PositiveBigIntegerField()
    sender_name = models.CharField(max_length=300)
    # Blank once the message is deleted: a digest shows it as deleted.
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)
    email = models.CharField(max_length=10, choices=Email.choices, default=Email.PENDING)
    # When its e-mail (its own, or its digest) was sent, or taken to be sent: what the hour's bound counts.
    emailed_at = models.DateTimeField(null=True, blank=True)
    # The digest it goes out in (its Message-ID), from when the digest is decided; None for its own e-mail.
    digest = models.UUIDField(null=True, blank=True)
    # Held, or a digest being sent: not before this.
    due_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "event_id"], name="messaging_notification_event")]
        indexes = [
            models.Index(fields=["user", "read_at"], name="messaging_notification_unread"),
            # The hour's bound: a user's e-mails of the last hour.
            models.Index(
                fields=["user", "emailed_at"],
                name="messaging_notification_emailed",
                condition=models.Q(emailed_at__isnull=False),
            ),
            # The consumers' rounds: digests due, only while some wait.
            models.Index(
                fields=["due_at"], name="messaging_notification_due", condition=models.Q(email__in=["held", "sending"])
            ),
            # prune_notifications.
            models.Index(fields=["created_at"], name="messaging_notification_created"),
            # A message's delete finds its mentions by it (messaging/events/redaction.py).
            models.Index(fields=["room", "seq"], name="messaging_notification_message"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.room}#{self.seq}"
