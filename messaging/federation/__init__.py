"""Federation (PROTOCOL.md 1.2, "Two deployments, one conversation"; docs/FEDERATION.md).

Deployments of the app share public rooms. A room has a home; commands of
another deployment's users on it are carried there (`routing`, `carried`),
and its changes come back to every peer with members in it as events
(`pushing`, `applying`), with gaps filled from the home's rooms
(`catchup`). Between peers every request is signed (`signing`, `gate`).

- `config`: `MESSAGING_NODE`, the peers and their secrets, read once
- `signing`: the HMAC of a request, made and checked (pure)
- `checks`: the system checks of the configuration (`messaging.E004`-`E007`, `W004`)
- `addresses`: `slug@node` in commands, read for the core's protocol
- `identities`: users of other deployments, as local accounts and on the wire
- `peers`: signed requests to a peer
- `gate`: what every request from a peer passes (signature, size, rate)
- `views`: the `/federation/` paths
- `carried`: the home's side of a carried command
- `routing`: the replica's side: commands on remote rooms sent home
- `joins`: a join of a remote room, its ack and backlog
- `models`: each peer's cursor per shared room
- `outgoing`: a peer's pending changes, read from the outbox and written for the wire
- `pushing`: the link thread: one pusher per peer, by an advisory lock
- `applying`: the replica applies pushed changes, in rev order, and tells its sockets
- `catchup`: pages of a room's state after a rev: made at home, applied by a replica
"""

from __future__ import annotations


def start() -> None:
    """Start this process's link thread, once, if federation is on (docs/FEDERATION.md):
    a host calls it where it makes its ASGI application."""
    from .pushing import start_link

    start_link()
