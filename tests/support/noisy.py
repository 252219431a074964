"""Rooms whose text costs the most to send: control characters, each six bytes of JSON (`"\\u0001"`).

Inserted in SQL, as tests/support/crowds.py does: the tests are about what
the server sends of such a room, not about how it got there.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import connection

from messaging.models import Membership, Message, Room

# The longest body a post may have (BODY_MAX_CHARS' default), and the longest
# first and last names of auth.User.
BODY_CHARS = 4000
NAME_CHARS = 150
CONTROL = "\x01"


def noisy_room(slug: str, count: int, *, chars: int = BODY_CHARS) -> Room:
    """A room (created if missing) holding `count` messages of `chars` control characters,
    seq 1 to `count`, each from a sender of its own room's membership."""
    sender = get_user_model().objects.create_user(username=f"noise-{slug}", first_name="noise")
    room, _ = Room.objects.get_or_create(slug=slug)
    Membership.objects.get_or_create(room=room, user=sender, defaults={"joined_seq": 0})
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Message._meta.db_table} (room_id, seq, sender_id, client_msg_id, body, state, sent_at,"
            " posted_rev, rev, version)"
            " SELECT %s, g, %s, 'noise-' || g, repeat(chr(1), %s), 'sent', now(), g, g, 1"
            " FROM generate_series(1, %s) g",
            [room.pk, sender.pk, chars, count],
        )
    Room.objects.filter(pk=room.pk).update(last_seq=count, last_rev=count)
    return room


def noisy_members(slug: str, count: int) -> list:
    """Make `count` new users, members of the room `slug` (created if missing), whose
    display names are as long as auth.User's allow (301 characters), all control
    characters; returns their ids."""
    name = CONTROL * NAME_CHARS
    room, _ = Room.objects.get_or_create(slug=slug)
    users = get_user_model().objects.bulk_create(
        get_user_model()(username=f"noisy-{slug}-{n}", password="!", first_name=name, last_name=name)
        for n in range(count)
    )
    Membership.objects.bulk_create(Membership(room=room, user=user, joined_seq=room.last_seq) for user in users)
    return [user.pk for user in users]
