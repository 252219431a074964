"""Rooms of other deployments in commands: `slug@node` (PROTOCOL.md 1.2, "Addresses").

The core's protocol reads a command's `room` through `read_address` once
it is installed (`install`, at the app's start): this deployment's own
name is its own room, the bare slug; a peer's name is that peer's room, as
its replica is named here, `slug@node`; anything else is `invalid`, as an
address is with federation off.
"""

from __future__ import annotations

from ..core.exceptions import Invalid
from ..core.protocol import ROOM_ADDRESS, read_room_addresses
from .config import federation


def read_address(slug: str, node: str) -> str:
    """The room `slug@node` as this deployment names it; `Invalid` if `node` shares no rooms with it."""
    found = federation()
    if found is None:
        raise Invalid("room must match ^[a-z0-9][a-z0-9-]{0,63}$")
    if node == found.node:
        return slug
    if node not in found.peers:
        raise Invalid(f"room: no deployment {node!r} shares rooms with this one")
    return f"{slug}@{node}"


def home_of(room: str) -> tuple[str, str] | None:
    """(slug at its home, its home's name) of a room of another deployment, None for a room of this one."""
    found = ROOM_ADDRESS.fullmatch(room)
    return (found.group(1), found.group(2)) if found else None


def replica_name(slug: str, node: str) -> str:
    """How this deployment names the room `slug` of the peer `node`."""
    return f"{slug}@{node}"


def install() -> None:
    read_room_addresses(read_address)
