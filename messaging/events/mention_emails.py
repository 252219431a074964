"""Mention e-mails: at most `MENTION_EMAILS_PER_HOUR` per user in any hour, the rest in one digest after it.

The mentions consumer (mentions.py) hands each new notification to
`email_mention`; its own loop runs `send_due_digests` every
`DIGEST_CHECK_EVERY` seconds (`consumers.also_every`), so digests need no
process of their own, and any consumer of the group, or several at once,
sends them.

- **The bound.** A mention's e-mail is decided under a lock on the user's
  row, so consumers deciding for one user at once count each other's: it
  gets an e-mail of its own while fewer than the bound went out (or are
  going out) in the last hour and no mention of theirs is held; otherwise it
  is `held`, due when the hour has room again (`due_at`: an hour after the
  e-mail that leaves the window first). A digest counts as one e-mail.
- **A digest** takes every held mention of the user when it is due: the
  mentions are bound to it (`digest`, `sending`) in one committed
  transaction before it is sent, as one e-mail quoting at most
  `MENTION_DIGEST_ITEMS` of them, oldest first. A mention whose message was
  deleted since (its body blanked) is shown as a deleted message. A user
  online by then gets none (`online`): the page shows the badge.
- **Once.** The send holds the mentions' row locks until it has marked them
  `sent` (`FOR UPDATE SKIP LOCKED`: another consumer passes them by). A
  consumer that crashes between sending and marking leaves them `sending`:
  the next round sends them again, the same mentions under the same
  `Message-ID` (`<event_id@host>` for one mention, `<digest@host>` for a
  digest), which mail systems take as one message.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage
from django.core.mail.utils import DNS_NAME
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import Min
from django.db.models.functions import Coalesce
from django.utils import timezone

from ..conf import get_settings
from ..ids import uuid7
from .models import Notification

log = logging.getLogger(__name__)

Email = Notification.Email
HOUR = timedelta(hours=1)
# Seconds between a consumer's looks for digests that are due.
DIGEST_CHECK_EVERY = 2.0
# Users whose digests one look sends at most; the rest wait for the next.
DIGESTS_PER_ROUND = 100
# A digest that failed to go out (SMTP down, Redis down) is tried again after this.
RETRY_AFTER = timedelta(minutes=1)
DELETED = "(a message since deleted)"


def now() -> datetime:
    """The time every decision here reads (tests move it instead of waiting an hour)."""
    return timezone.now()


def online(user_id: int) -> bool:
    """Whether any server process holds a socket of the user: while it does, it
    subscribes to the user's channel (`fanout.RedisHub.user_channel`). Without
    Redis there is no telling: offline."""
    url = get_settings().REDIS_URL
    if not url:
        return False
    with redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2) as client:
        db = client.connection_pool.connection_kwargs.get("db", 0)
        [(_, count)] = client.pubsub_numsub(f"messaging:{db}:user:{user_id}")
    return bool(count > 0)


def lock_user(user_id: int) -> Any:
    """The user's row, locked until the transaction ends: one decision about their e-mails at a time."""
    return get_user_model().objects.select_for_update().get(pk=user_id)


def room_again(user_id: int, at: datetime) -> datetime | None:
    """None while the user may get one more e-mail at `at`; else when they may again."""
    bound = get_settings().MENTION_EMAILS_PER_HOUR
    # One row per e-mail of the last hour: a mention's own (its event_id), a digest's (the first of its rows).
    sent = sorted(
        Notification.objects.filter(user_id=user_id, emailed_at__gt=at - HOUR)
        .annotate(mail=Coalesce("digest", "event_id"))
        .values("mail")
        .annotate(first=Min("emailed_at"))
        .values_list("first", flat=True)
    )
    if len(sent) < bound:
        return None
    again: datetime = sent[len(sent) - bound] + HOUR
    return again


def email_mention(notification: Notification) -> None:
    """A new mention's e-mail: its own, held for a digest, or none (online, no address); its own sent once."""
    if notification.email == Email.PENDING and not decide(notification):
        return
    send_own(notification.pk)


def decide(notification: Notification) -> bool:
    """Whether the mention gets an e-mail of its own (it is then `sending`, counted in the hour)."""
    user = notification.user
    if not user.email:
        status = Email.NO_ADDRESS
    elif online(user.pk):
        status = Email.ONLINE
    else:
        with transaction.atomic():
            lock_user(user.pk)
            row = Notification.objects.select_for_update().get(pk=notification.pk)
            if row.email != Email.PENDING:  # decided meanwhile by another consumer
                return row.email == Email.SENDING and row.digest is None
            at = now()
            again = room_again(user.pk, at)
            if again is None and not Notification.objects.filter(user_id=user.pk, email=Email.HELD).exists():
                row.email, row.emailed_at = Email.SENDING, at
                row.save(update_fields=["email", "emailed_at"])
                return True
            # Past the bound, or behind mentions already held: all go out together.
            row.email, row.due_at = Email.HELD, again or at
            row.save(update_fields=["email", "due_at"])
            return False
    Notification.objects.filter(pk=notification.pk, email=Email.PENDING).update(email=status)
    return False


def send_own(notification_id: int) -> None:
    """Send a `sending` mention's own e-mail and mark it sent, holding its row until then."""
    with transaction.atomic():
        row = (
            Notification.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("user")
            .filter(pk=notification_id, email=Email.SENDING, digest__isnull=True)
            .first()
        )
        if row is None:
            return  # sent, or being sent by another consumer
        EmailMessage(
            subject=f"{row.sender_name} mentioned you in {row.room}",
            body=f"{row.sender_name} in {row.room}:\n\n{row.body or DELETED}\n",
            from_email=settings.DEFAULT_FROM_EMAIL,
            to=[row.user.email],
            headers={"Message-ID": f"<{row.event_id}@{DNS_NAME}>"},
        ).send()  # an SMTP failure raises: the event is retried after the claim time
        Notification.objects.filter(pk=row.pk).update(email=Email.SENT, emailed_at=now())


def send_due_digests(limit: int = DIGESTS_PER_ROUND) -> int:
    """One round of a mentions consumer: the digests that are due, each sent once; how many users had one."""
    users = list(
        Notification.objects.filter(email__in=[Email.HELD, Email.SENDING], due_at__lte=now())
        .order_by()
        .values_list("user_id", flat=True)
        .distinct()[:limit]
    )
    for user_id in users:
        try:
            digest = digest_being_sent(user_id) or decide_digest(user_id)
            if digest is not None:
                send_digest(user_id, digest)
        except (OperationalError, InterfaceError):
            raise  # the database: the consumer waits for it
        except Exception:
            log.exception("mentions: the digest of user %s failed; trying again in %s", user_id, RETRY_AFTER)
            Notification.objects.filter(
                user_id=user_id, email__in=[Email.HELD, Email.SENDING], due_at__isnull=False
            ).update(due_at=now() + RETRY_AFTER)
    return len(users)


def digest_being_sent(user_id: int) -> uuid.UUID | None:
    """A digest of the user decided before and not marked sent (its sender crashed, or failed)."""
    return (
        Notification.objects.filter(user_id=user_id, email=Email.SENDING, digest__isnull=False)
        .values_list("digest", flat=True)
        .first()
    )


def decide_digest(user_id: int) -> uuid.UUID | None:
    """Bind every held mention of the user to a new digest, if the hour has room; the digest."""
    with transaction.atomic():
        user = lock_user(user_id)
        held = Notification.objects.filter(user_id=user_id, email=Email.HELD)
        if not held.exists():
            return None
        at = now()
        if not user.email:
            held.update(email=Email.NO_ADDRESS, due_at=None)
            return None
        if online(user_id):
            held.update(email=Email.ONLINE, due_at=None)
            return None
        again = room_again(user_id, at)
        if again is not None:
            held.update(due_at=again)
            return None
        digest = uuid7()
        held.update(email=Email.SENDING, digest=digest, emailed_at=at, due_at=at)
        return digest


def send_digest(user_id: int, digest: uuid.UUID) -> None:
    """Send one digest and mark its mentions sent, holding all their rows until then."""
    with transaction.atomic():
        bound = Notification.objects.filter(user_id=user_id, digest=digest, email=Email.SENDING)
        rows = list(bound.select_for_update(skip_locked=True).order_by("created_at", "pk"))
        if not rows or len(rows) < bound.count():
            return  # being sent by another consumer (or a row is busy): the next round sees
        user = get_user_model().objects.get(pk=user_id)
        digest_message(user.email, rows, digest).send()
        bound.filter(pk__in=[row.pk for row in rows]).update(email=Email.SENT, emailed_at=now(), due_at=None)


def digest_message(address: str, rows: list[Notification], digest: uuid.UUID) -> EmailMessage:
    """One e-mail for many mentions: the first `MENTION_DIGEST_ITEMS` quoted, the rest counted."""
    shown = get_settings().MENTION_DIGEST_ITEMS
    rooms = sorted({row.room for row in rows})
    mentions = f"{len(rows)} mention{'s' if len(rows) > 1 else ''}"
    where = ", ".join(rooms[:3]) + (f" and {len(rooms) - 3} more rooms" if len(rooms) > 3 else "")
    lines = [f"You were mentioned while your e-mails waited: {mentions}.", ""]
    for row in rows[:shown]:
        quoted = "\n".join(f"> {line}" for line in row.body.splitlines()) if row.body else f"> {DELETED}"
        lines += [f"{row.sender_name} in {row.room}:", quoted, ""]
    if len(rows) > shown:
        lines.append(f"... and {len(rows) - shown} more.")
    return EmailMessage(
        subject=f"{mentions} in {where}",
        body="\n".join(lines) + "\n",
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[address],
        headers={"Message-ID": f"<{digest}@{DNS_NAME}>"},
    )
