"""Which command results carry member lists, whose entries gain `online` (PROTOCOL.md 1.1).

The chat knows nothing of sockets, and a member list is built on a database
thread: the transport layer, which holds the sockets and asks Redis from
the event loop, adds `online` to these results' `members` before it sends
the ack (messaging/transport/presence.py's `add_online`). An entry point
other than the socket does the same.
"""

from __future__ import annotations

MEMBER_LISTS = frozenset({"room.join", "room.members"})
