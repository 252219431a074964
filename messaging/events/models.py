"""The events' tables: the outbox, each consumer group's inbox, and dead letters.

They belong to the `messaging` app (its migrations), so a host adds nothing
to `INSTALLED_APPS`; `messaging/models.py` imports them.
"""
from __future__ import annotations

from django.db import models


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
            models.Index(fields=["id"], name="messaging_event_unpublished",
                         condition=models.Q(published_at__isnull=True)),
            models.Index(fields=["published_at"], name="messaging_event_published",
                         condition=models.Q(published_at__isnull=False)),
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

    def __str__(self) -> str:
        return f"{self.group}: {self.event_id}"
