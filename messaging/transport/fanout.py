"""Live fan-out: a room's frames to every socket joined to it, and a user's
frames to that user's sockets, in every process.

Each server process keeps which of its sockets joined which room, and (with
Redis) one Pub/Sub connection subscribed to exactly those rooms. The frames a
process has queued for a room go as one `PUBLISH` to the room's channel (a
batch of posts makes several), pipelined with those of other rooms; every
process subscribed to the room decodes it once and hands each frame to its
sockets in that room. The publishing process hears its
own publish like any other, so every socket of a room sees one order: the
order in which Redis received the publishes.

Frames for one user (a `state` frame for a message's sender) travel the same
way on the user's own channel: the process subscribes to it while it holds a
socket of that user, and hands each frame to those sockets; a frame addressed
to the user's sockets in a room goes only to those joined to it. A user's
frames keep their order among themselves; they are not ordered against the
rooms' frames.

Why not channels' `group_send`: with `RedisChannelLayer` a broadcast costs a
Lua script over the group's members, a message per member in Redis and a
receive and dispatch per member, which made it the largest item of the
server's profile, and its per-channel capacity silently drops frames under
load (docs/PERFORMANCE.md). A room's frames are the same bytes for every
member, so they travel once per process.

Fan-out is best effort by design: the effect is committed and acked before
its frame is published, so a frame lost to a Redis outage loses nothing;
clients catch up by seq with `room.join` and `since`. Without Redis the hub
reaches the sockets of its own process only (the embedded demo).

Except what ends a membership: a `room.left` is what makes a removed
member's sockets stop hearing the room. Its publish is tried again, with the
next batch or after a pause, until Redis takes it (at most `PUBLISH_BACKLOG`
wait), and a batch publishes its users' frames before its rooms', so a
process's `room.left` reaches Redis before any frame of the room it queued
after it. Where it is lost all the same (another process's subscription was
down), the hub's `MembershipWatch` (messaging/transport/memberships.py) finds
the ended membership in the database: as the subscription comes back, before
any frame it hears is handed on, and every `MEMBERSHIP_CHECK_INTERVAL`.
"""

from __future__ import annotations

from ..backends import backend, hub_path
from ..conf import get_settings
from ..core.runtime import runtime
from .hub import Hub, Member, user_key
from .packing import unpack, unpack_for_user
from .redis_hub import RedisHub

__all__ = ["Hub", "Member", "RedisHub", "get_hub", "make_hub", "unpack", "unpack_for_user", "user_key"]


def make_hub() -> Hub:
    """A hub of the class `HUB` names (messaging/backends.py): `RedisHub` with `REDIS_URL`, else `Hub`."""
    conf = get_settings()
    hub: Hub = backend("HUB", hub_path(conf)).from_settings(conf)
    return hub


def get_hub() -> Hub:
    """This event loop's hub (a server process has one loop; tests have one per test), closed with the loop."""
    return runtime().part("hub", make_hub, close=lambda hub: hub.aclose())
