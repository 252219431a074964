"""Deleted means gone (PROTOCOL.md 1.2): a deleted message's body blanked in every copy the events keep.

A message's body leaves its row in its events: the outbox's `message.posted`
and `message.edited` rows, and what is made of them in the app's tables:
webhook deliveries, dead letters (of a consumer group or of a webhook
endpoint) and mention notifications. `message.delete` calls `blank_copies`
in its own transaction, so the tombstone and the blanking commit together.
Each copy is found by an index, never by reading a table: the events, their
deliveries and dead letters by the events' ids (the message keeps its post's,
each version its edit's), mentions by the message's room and seq.

Two kinds of writer race a delete, and a lock orders each against it:

- the relay marks a batch published in the transaction that publishes it
  (messaging/events/relay.py), under the events' row locks: a delete waits
  for a batch that holds one of its events to be out, and a batch waits for
  a delete that blanked one of them to commit, then publishes it blank;
- whatever writes a new copy (a consumer's handler, a dead letter) asks
  `as_it_stands` first, in the transaction that writes it. That locks the
  message's row as the delete does, so the copy commits either before the
  delete takes the row (and the delete blanks it) or after the delete, blank.

Lock order: the message's row (`locked_message`), then the events' rows,
the deliveries, the dead letters and the mentions, each kind in id order,
then the room's row (`next_rev`). Whoever holds one of those rows waits for
no message's row: the relay takes the events' rows alone, in id order; the
webhook sender leases deliveries with SKIP LOCKED and writes one at a time;
the prunes skip locked rows.

What this cannot reach (docs/EVENTS.md, "Deleted means gone"): what left
the database before the delete committed, the stream's entries, POSTs,
e-mails, consumers' own tables.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from django.db.models import QuerySet

from .models import DeadLetter, Event, Notification, WebhookDelivery

if TYPE_CHECKING:  # messaging/models.py imports this package's models: imported where used
    from ..models import Message

# The events whose data carries the message's body.
BODY_TYPES = ("message.posted", "message.edited")


def blanked(data: Any) -> Any:
    """An event's data with its message's body blank: `body` "" and `deleted` true, as a
    `msg` frame of a deleted message has them, and without its files (their names are content too)."""
    if isinstance(data, dict) and "body" in data:
        return {key: value for key, value in data.items() if key != "attachments"} | {"body": "", "deleted": True}
    return data


def blanked_event(event: Any) -> Any:
    """A copy of a whole event (a delivery's, a dead letter's) with its data blanked."""
    if isinstance(event, dict) and "data" in event:
        return {**event, "data": blanked(event["data"])}
    return event


def rewrite(queryset: QuerySet[Any], fields: list[str], change: Callable[[Any], None]) -> None:
    """`change` each row of `queryset`, locked in id order, and save `fields`."""
    rows = list(queryset.select_for_update().order_by("pk"))
    for row in rows:
        change(row)
    if rows:
        queryset.model.objects.bulk_update(rows, fields)


def body_event_ids(message: Message) -> list[UUID]:
    """The ids of the events that carried the message's body: its post's and its edits'.

    The message and its versions keep them. A message posted or edited by a
    version that did not keep them (or with the outbox off) has its events
    looked up in the room's outbox instead: a range of its `(room_id,
    position)` index, the room's retained events (`EVENTS_RETENTION`).
    """
    from ..models import MessageVersion

    edits = MessageVersion.objects.filter(message=message, kind=MessageVersion.Kind.EDIT).order_by("version")
    ids = [message.posted_event_id, *edits.values_list("event_id", flat=True)]
    if all(ids):
        return cast(list[UUID], ids)  # none is None
    return list(
        Event.objects.filter(room_id=message.room_id, type__in=BODY_TYPES, data__seq=message.seq).values_list(
            "event_id", flat=True
        )
    )


def blank_copies(message: Message, room: str) -> None:
    """Blank the body of `message` (being deleted, its row locked) in its events and every copy of them.

    In the delete's transaction, before it takes the room's row: a wait for
    the relay's batch holds no other change of the room.
    """
    ids = body_event_ids(message)
    if ids:
        rewrite(Event.objects.filter(event_id__in=ids), ["data"], lambda e: setattr(e, "data", blanked(e.data)))
        for model in (WebhookDelivery, DeadLetter):
            rewrite(
                model.objects.filter(event_id__in=ids), ["event"], lambda c: setattr(c, "event", blanked_event(c.event))
            )

    # A blank body is how a mention e-mail, its own or a digest, knows the message is deleted (mention_emails.py).
    rewrite(Notification.objects.filter(room=room, seq=message.seq), ["body"], lambda n: setattr(n, "body", ""))


def message_deleted(event: dict[str, Any]) -> bool:
    """Whether `event` carries the body of a message that is deleted.

    For such an event, it locks the message's row (as a delete does) until the
    caller's transaction ends: call it in the transaction that writes a copy
    of the event. Any other event: False, and nothing locked.
    """
    from ..models import Message

    data = event.get("data")
    if event.get("type") not in BODY_TYPES or not isinstance(data, dict) or "body" not in data:
        return False
    if not isinstance(event.get("room"), str) or not isinstance(data.get("seq"), int):
        return False
    deleted_at = (
        Message.objects.select_for_update(no_key=True, of=("self",))
        .filter(room__slug=event["room"], seq=data["seq"])
        .order_by("pk")
        .values_list("deleted_at", flat=True)
        .first()
    )
    return deleted_at is not None


def as_it_stands(event: dict[str, Any]) -> dict[str, Any]:
    """`event` as a copy of it may be written now: its data blanked if its message is deleted.
    In the transaction that writes the copy (`message_deleted`)."""
    return blanked_event(event) if message_deleted(event) else event
