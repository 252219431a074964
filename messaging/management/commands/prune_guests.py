"""Delete the guest accounts `/login/` made that have been idle past `GUEST_RETENTION`.

Every guest sign-in makes an account, and nothing else ever removes one. A
guest has no password: its session is the only way in, so once that is gone
the account can never be used again.

A guest is *idle* when, for the whole retention (30 days by default), it has
not signed in, joined a room, sent a receipt or an exactly-once command
(its latest `last_login`, membership, watermark move and command record are
all older), and no unexpired session of it is in the database. Such an
account goes with its memberships, watermarks and command records.

A guest who ever posted is kept, however idle: deleting a user deletes its
messages (the foreign key cascades), and those are part of other people's
history, seqs and read states. Reactions it gave stay counted (the counts
are per message), only the records that deduplicate them go.

Only accounts that look like those of the demo's `guest_login` are candidates: the username
`guest-` and 16 hex digits, no usable password, neither staff nor superuser.

A guest with an unexpired session is never a candidate, so only a socket
that outlived its session by less than `SESSION_CHECK_INTERVAL` could still
be writing for one. Each batch locks its users' rows, then checks them again
in a new statement: a post (membership, record) committed by then is seen and
keeps its guest; one that commits later checks its foreign key against the
locked, then deleted row and fails, so it is never deleted with the guest.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.core.management.base import CommandError
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from messaging.models import CommandRecord, Membership, Message, WatermarkMove
from messaging.ops.retention import RetentionCommand

# How the demo's `project.guests.guest_login` names the accounts it makes.
GUEST_USERNAME = r"^guest-[0-9a-f]{16}$"


class Command(RetentionCommand):
    help = "Delete guest accounts idle for longer than MESSAGING['GUEST_RETENTION'] that never posted."
    retention_setting = "GUEST_RETENTION"
    batch_default = 500
    batch_help = "accounts per transaction, so no lock is held long"

    def prune(self, cutoff: datetime, batch: int, dry_run: bool) -> None:
        live = signed_in_user_ids(cutoff)
        idle = idle_guests(cutoff)
        kept = posted_guests(cutoff).count()
        if dry_run:
            count = sum(1 for pk in idle.values_list("pk", flat=True).iterator() if str(pk) not in live)
            self.stdout.write(
                f"would delete {count} guest accounts idle since {cutoff.isoformat()}; "
                f"{kept} idle guests who posted are kept"
            )
            return
        deleted = 0
        after = None
        while True:
            page = idle.order_by("pk")
            if after is not None:
                page = page.filter(pk__gt=after)
            ids = list(page.values_list("pk", flat=True)[:batch])
            if not ids:
                break
            after = ids[-1]
            deleted += delete_if_still_idle([pk for pk in ids if str(pk) not in live], cutoff)
        self.stdout.write(
            f"deleted {deleted} guest accounts idle since {cutoff.isoformat()}; {kept} idle guests who posted are kept"
        )


def guests() -> QuerySet[Any]:
    User = get_user_model()
    return User.objects.filter(
        **{f"{User.USERNAME_FIELD}__regex": GUEST_USERNAME},
        password__startswith="!",  # Django's mark of an unusable password
        is_staff=False,
        is_superuser=False,
    )


def quiet_since(cutoff: datetime) -> QuerySet[Any]:
    """Guests with no sign-in, join, receipt or exactly-once command since `cutoff`."""
    user = OuterRef("pk")
    return (
        guests()
        .filter(Q(last_login__lt=cutoff) | Q(last_login__isnull=True, date_joined__lt=cutoff))
        .exclude(Exists(Membership.objects.filter(user=user, joined_at__gte=cutoff)))
        .exclude(Exists(WatermarkMove.objects.filter(membership__user=user, at__gte=cutoff)))
        .exclude(Exists(CommandRecord.objects.filter(user=user, created_at__gte=cutoff)))
    )


def idle_guests(cutoff: datetime) -> QuerySet[Any]:
    return quiet_since(cutoff).exclude(Exists(Message.objects.filter(sender=OuterRef("pk"))))


def posted_guests(cutoff: datetime) -> QuerySet[Any]:
    return quiet_since(cutoff).filter(Exists(Message.objects.filter(sender=OuterRef("pk"))))


def signed_in_user_ids(cutoff: datetime) -> set[str]:
    """The users of unexpired sessions, where the session store can be listed (the database's).

    Other stores (cache, signed cookies) cannot be: then a session made at
    sign-in must have run out within the retention, which holds when it is
    at least SESSION_COOKIE_AGE and sessions are not extended on every request.
    """
    store = import_module(settings.SESSION_ENGINE).SessionStore
    if not issubclass(store, DatabaseSessionStore):
        too_short = cutoff > timezone.now() - timedelta(seconds=settings.SESSION_COOKIE_AGE)
        if settings.SESSION_SAVE_EVERY_REQUEST or too_short:
            raise CommandError(
                f"{settings.SESSION_ENGINE} sessions cannot be listed: the retention must be at least "
                f"SESSION_COOKIE_AGE ({settings.SESSION_COOKIE_AGE} s) with SESSION_SAVE_EVERY_REQUEST off, "
                "so that no idle guest is still signed in"
            )
        return set()
    decoder = store()
    live = store.get_model_class().objects.filter(expire_date__gt=timezone.now())
    users = (decoder.decode(data).get(SESSION_KEY) for data in live.values_list("session_data", flat=True).iterator())
    return {str(user) for user in users if user is not None}


def delete_if_still_idle(ids: list[Any], cutoff: datetime) -> int:
    """Delete those of `ids` that are idle guests once their rows are locked; how many were deleted."""
    if not ids:
        return 0
    User = get_user_model()
    with transaction.atomic():
        locked = list(User.objects.select_for_update().filter(pk__in=ids).order_by("pk").values_list("pk", flat=True))
        # A new statement, a new snapshot: whatever committed before the locks is seen.
        still = list(idle_guests(cutoff).filter(pk__in=locked).values_list("pk", flat=True))
        if not still:
            return 0
        User.objects.filter(pk__in=still).delete()
        return len(still)
