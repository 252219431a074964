"""Rooms of many stored messages, written in bulk: what long histories look like without posting them."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from messaging.models import Membership, Message, Room


@transaction.atomic
def archive(slug: str, member: Any, bodies: list[str]) -> None:
    """A room of `bodies` (seq and rev 1, 2, ...), posted by a user of its own; `member` (or None) a member of it.

    In one transaction, as the server writes a post: a page connected meanwhile
    lists and joins its rooms on its own, and a room whose `last_seq` is
    already 130 with its messages not yet in would join with an empty backlog.
    """
    sender = get_user_model().objects.create_user(username=f"poster-{slug}", first_name="poster")
    room = Room.objects.create(slug=slug)
    Membership.objects.create(room=room, user=sender)
    if member is not None:
        Membership.objects.create(room=room, user=member)
    write_history(room, sender, bodies, key=slug)


@transaction.atomic
def write_history(room: Room, sender: Any, bodies: list[str], *, key: str) -> None:
    """`bodies` by `sender` as the first messages of the empty `room` (seq and rev 1, 2, ...; command ids
    `<key>-<seq>`), its `last_seq` and `last_rev` moved with them, in one transaction."""
    Message.objects.bulk_create(
        Message(
            room=room,
            seq=n,
            sender=sender,
            client_msg_id=f"{key}-{n}",
            body=body,
            sent_at=timezone.now(),
            posted_rev=n,
            rev=n,
        )
        for n, body in enumerate(bodies, start=1)
    )
    Room.objects.filter(pk=room.pk).update(last_seq=len(bodies), last_rev=len(bodies))
