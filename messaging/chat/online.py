"""Who is online, as member lists say it (`online` in the join ack's and `room.members`' entries).

The chat knows nothing of sockets: the transport layer, which holds them,
provides the lookup (messaging/transport/presence.py calls `provide`). Until
it does (a command run without the transport), every member is offline.
"""
from __future__ import annotations

from typing import Any, Callable

# From user ids to the text (`str(id)`) of those online.
Lookup = Callable[[list[Any]], set[str]]

_lookup: Lookup | None = None


def provide(lookup: Lookup) -> None:
    global _lookup
    _lookup = lookup


def with_online(entries: list[dict]) -> list[dict]:
    """Member entries (with their `user` ids) with `online` added, in one lookup for the lot."""
    online = _lookup([entry["user"] for entry in entries]) if _lookup is not None and entries else set()
    for entry in entries:
        entry["online"] = str(entry["user"]) in online
    return entries
