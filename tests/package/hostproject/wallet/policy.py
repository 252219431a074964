"""The host's room policy: rooms named `team-<group>` belong to that Django group.

The example of docs/INTEGRATION.md: only the group's members join and post
in its room, and the members of `<group>-leads` moderate it besides the
default's owner and staff. Every other room follows the default policy.
"""

from messaging import RoomPolicy

PREFIX = "team-"


def group_of(room) -> str | None:
    return room.slug[len(PREFIX) :] if room.slug.startswith(PREFIX) else None


def in_group(user, name: str) -> bool:
    return user.groups.filter(name=name).exists()


class TeamPolicy(RoomPolicy):
    def can_join(self, user, room, *, member):
        group = group_of(room)
        return super().can_join(user, room, member=member) if group is None else in_group(user, group)

    def can_post(self, user, room):
        group = group_of(room)
        return group is None or in_group(user, group)

    def can_moderate(self, user, room):
        group = group_of(room)
        return super().can_moderate(user, room) or (group is not None and in_group(user, f"{group}-leads"))
