"""Webhooks: each event POSTed to the host's endpoints, signed, retried, and never applied twice on their side.

Two steps, each with its own guarantee:

- `enqueue` is a consumer group's handler (`messaging_consume
  messaging.events.webhooks.enqueue --group webhooks`): in the group's
  transaction it writes one `WebhookDelivery` per endpoint that wants the
  event, so a redelivered event adds none.
- `messaging_webhooks` sends the deliveries that are due. It leases them in a
  short transaction of its own (`FOR UPDATE SKIP LOCKED`, so several senders
  share the work) and POSTs outside any transaction. A 2xx answer delivers;
  anything else (an error status, a timeout, a refused connection) is retried
  with exponential backoff and full jitter, up to `WEBHOOK_MAX_ATTEMPTS`, then
  the delivery is dead and a dead letter says why. Every attempt is recorded.

The far side cannot join our transaction, so it dedupes: every POST carries
the event's id as `webhook-id` and `Idempotency-Key`, the same on every
retry, and is signed in the Standard Webhooks form (`webhook-timestamp`,
`webhook-signature`: signatures.py), which receivers check with an existing
library; `Messaging-Signature` (deprecated) is sent beside it for one more
release. Where a POST may go, and that no redirect is followed: outbound.py.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

import orjson
from django.db import transaction
from django.utils import timezone

from ..conf import get_settings
from . import outbound
from .models import DeadLetter, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from .redaction import as_it_stands
from .retries import full_jitter
from .signatures import MESSAGING_SIGNATURE, sign, standard_headers, verify

log = logging.getLogger(__name__)

# The deprecated header's name, its signer and its checker, where receivers found them before.
SIGNATURE_HEADER = MESSAGING_SIGNATURE
__all__ = [
    "SIGNATURE_HEADER",
    "attempt",
    "backoff",
    "deliver_due",
    "enqueue",
    "lease_due",
    "post",
    "prune",
    "sign",
    "verify",
]


def enqueue(event: dict[str, Any]) -> None:
    """The `webhooks` group's handler: a delivery per active endpoint that wants the event's type.

    The stream's copy of the event may carry the body of a message deleted
    since; the delivery has it blank (`as_it_stands`, in the group's transaction).
    """
    now = timezone.now()
    with transaction.atomic():
        event = as_it_stands(event)
        WebhookDelivery.objects.bulk_create(
            [
                WebhookDelivery(endpoint=endpoint, event_id=event["event_id"], event=event, next_attempt_at=now)
                for endpoint in WebhookEndpoint.objects.filter(active=True)
                if endpoint.wants(event["type"])
            ],
            ignore_conflicts=True,
        )


def backoff(attempts: int) -> float:
    """Seconds before the next attempt, after `attempts` failed: full jitter under an exponential cap."""
    conf = get_settings()
    return full_jitter(attempts - 1, base=conf.WEBHOOK_BACKOFF, cap=conf.WEBHOOK_BACKOFF_CAP)


def lease_due(limit: int) -> list[WebhookDelivery]:
    """Take up to `limit` due deliveries for one attempt each: counted, and hidden until the attempt's lease ends."""
    conf = get_settings()
    now = timezone.now()
    with transaction.atomic():
        due = list(
            WebhookDelivery.objects.select_for_update(skip_locked=True)
            .select_related("endpoint")
            .filter(state=WebhookDelivery.State.PENDING, next_attempt_at__lte=now)
            .order_by("next_attempt_at")[:limit]
        )
        # A sender killed mid-POST leaves its lease to run out: the delivery is tried again then.
        lease = now + timedelta(seconds=conf.WEBHOOK_TIMEOUT * 2 + 5)
        for delivery in due:
            delivery.attempts += 1
            delivery.next_attempt_at = lease
        WebhookDelivery.objects.bulk_update(due, ["attempts", "next_attempt_at"])
    return due


def post(delivery: WebhookDelivery, timeout: float) -> tuple[int | None, str]:
    """POST the delivery's event; its status (None without an answer) and an error ("" on a 2xx)."""
    body = orjson.dumps(delivery.event)
    timestamp = int(time.time())
    secret = delivery.endpoint.secret
    headers = {
        "Content-Type": "application/json",
        **standard_headers(secret, str(delivery.event_id), timestamp, body),
        "Idempotency-Key": str(delivery.event_id),
        SIGNATURE_HEADER: sign(secret, timestamp, body),
        "User-Agent": "messaging-webhooks",
    }
    return outbound.post(
        delivery.endpoint.url, body, headers, timeout=timeout, allow_private=get_settings().WEBHOOKS_ALLOW_PRIVATE
    )


def attempt(delivery: WebhookDelivery) -> None:
    conf = get_settings()
    started = time.monotonic()
    status, error = post(delivery, conf.WEBHOOK_TIMEOUT)
    now = timezone.now()
    WebhookAttempt.objects.create(
        delivery=delivery, at=now, status=status, error=error[:2000], seconds=time.monotonic() - started
    )
    if not error:
        delivery.state, delivery.finished_at = WebhookDelivery.State.DELIVERED, now
    elif delivery.attempts >= conf.WEBHOOK_MAX_ATTEMPTS:
        delivery.state, delivery.finished_at = WebhookDelivery.State.DEAD, now
        log.error(
            "webhook %s: %s dead after %d attempts: %s",
            delivery.endpoint_id,
            delivery.event_id,
            delivery.attempts,
            error,
        )
        with transaction.atomic():
            # What was leased may carry the body of a message deleted since: not into the table.
            DeadLetter.objects.get_or_create(
                group=f"webhook:{delivery.endpoint_id}",
                event_id=delivery.event_id,
                defaults={"event": as_it_stands(delivery.event), "attempts": delivery.attempts, "error": error},
            )
    else:
        delivery.next_attempt_at = now + timedelta(seconds=backoff(delivery.attempts))
    delivery.save(update_fields=["state", "finished_at", "next_attempt_at"])


def deliver_due(limit: int | None = None) -> int:
    """One round: lease the due deliveries and attempt each; how many were attempted."""
    due = lease_due(limit or get_settings().WEBHOOK_BATCH)
    for delivery in due:
        attempt(delivery)
    return len(due)


def prune(retention: float) -> int:
    """Delete finished deliveries (and their attempts) older than `retention` seconds.

    Deliveries a message's delete holds (blanking them) are skipped, left to
    the next prune: waiting for one while holding others could meet that
    delete in a cycle (messaging/events/redaction.py).
    """
    cutoff = timezone.now() - timedelta(seconds=retention)
    with transaction.atomic():
        free = WebhookDelivery.objects.select_for_update(skip_locked=True).filter(finished_at__lt=cutoff)
        deleted, _ = WebhookDelivery.objects.filter(pk__in=list(free.values_list("pk", flat=True))).delete()
    return deleted
