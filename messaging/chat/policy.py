"""Who may do what in a room: the one place the commands ask (issue 25).

`RoomPolicy` implements PROTOCOL.md 1.1: a private room is seen, joined and
used by its members only; the room's owner (who made it with `room.create`)
and staff users moderate it, invite to it and delete any message in it; only
a message's sender edits it. An invitation (1.2) is not asked here: whoever
holds one may join the room it names, whatever `can_join` says, since
`can_invite` allowed it (messaging/chat/invitations.py). A host project replaces it by naming its own
subclass in `MESSAGING["ROOM_POLICY"]` (docs/INTEGRATION.md shows one that
maps rooms to the host's groups).

The methods take what the caller already knows (the room's row, whether the
user is a member) so the default costs no query. Membership itself is not a
role: every command on a room but `room.join`, `room.create` and the
moderation commands requires it, checked where the command reads the room.
`room.post`'s batch statement checks membership in SQL; when a host policy
overrides `can_post` the posts take the portable path, which asks it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.utils.module_loading import import_string

from ..conf import get_settings
from ..models import Message, Room


class RoomPolicy:
    """The default policy: PROTOCOL.md 1.1's rules. Subclass it and override what differs."""

    def can_see(self, user: Any, room: Room, *, member: bool) -> bool:
        """Whether `room` is listed to `user` (and its existence not hidden)."""
        return member or not room.private

    def can_create(self, user: Any, slug: str, *, private: bool) -> bool:
        """Whether `user` may make a room with `room.create` (a join of a new slug makes a public one)."""
        return True

    def can_join(self, user: Any, room: Room, *, member: bool) -> bool:
        """Whether `user` may `room.join` `room`: anyone a public one, members a private one."""
        return member or not room.private

    def can_post(self, user: Any, room: Room) -> bool:
        """Whether `user`, a member of `room`, may post in it."""
        return True

    def can_moderate(self, user: Any, room: Room) -> bool:
        """Whether `user` moderates `room`: removes members, deletes any message."""
        return bool(user.is_staff) or (room.owner_id is not None and room.owner_id == user.pk)

    def can_invite(self, user: Any, room: Room, *, member: bool) -> bool:
        """Whether `user` may invite users to `room` with `room.invite`; nobody is invited into a direct room."""
        return self.can_moderate(user, room) and not is_direct(room)

    def can_edit(self, user: Any, room: Room, message: Message) -> bool:
        """Whether `user`, a member of `room`, may edit `message`."""
        return bool(message.sender_id == user.pk)

    def can_delete(self, user: Any, room: Room, message: Message) -> bool:
        """Whether `user`, a member of `room`, may delete `message`."""
        return message.sender_id == user.pk or self.can_moderate(user, room)


def is_direct(room: Room) -> bool:
    from ..models import DirectRoom

    return DirectRoom.objects.filter(room=room).exists()


@lru_cache(maxsize=4)
def _policy(path: str) -> RoomPolicy:
    policy = import_string(path)()
    if not isinstance(policy, RoomPolicy):
        raise TypeError(f"MESSAGING['ROOM_POLICY'] {path!r} is not a subclass of messaging.chat.policy.RoomPolicy")
    return policy


def get_policy() -> RoomPolicy:
    """The policy `MESSAGING["ROOM_POLICY"]` names, one instance per process."""
    return _policy(get_settings().ROOM_POLICY)


def overrides(method: str) -> bool:
    """Whether the configured policy changes `method` from the default's (so a SQL shortcut of it does not hold)."""
    return getattr(type(get_policy()), method) is not getattr(RoomPolicy, method)
