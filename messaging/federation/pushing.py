"""The link thread: each server process pushes shared rooms' changes to the peers it leads.

No process beyond the servers (PROTOCOL.md 1.2): every server process runs
one thread with an event loop of its own (`start_link`), and in it one
pusher per peer. A pusher works only while it holds its peer's PostgreSQL
session advisory lock (on a connection of its own, tried again every
`CLAIM_EVERY` seconds): one process of the deployment pushes to a peer at a
time, and when it dies its lock goes with its connection and another takes
over. Should two push at once (a partition from the database), the peer
passes over what it took already (`rev`), and the cursors only move
forward.

A round: the pending changes (outgoing.py), one signed `POST
/federation/changes`, the cursors moved to where the peer says it took
each room. A push that fails, or a peer that took nothing, waits with full
jitter under `FEDERATION_BACKOFF_CAP`; an idle pusher looks again every
`FEDERATION_POLL_INTERVAL`. Nothing here is on a socket's path: a peer
that is away costs this deployment's own rooms nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from typing import Any

import psycopg

from ..conf import get_settings
from ..core.runtime import runtime
from ..events.retries import full_jitter
from ..events.settings import connection_params
from ..ops import metrics
from .config import federation
from .outgoing import advance, pending
from .peers import PeerUnavailable, call

log = logging.getLogger(__name__)

# The first key of the pushers' two-key advisory locks ("fedp").
PUSHER_LOCK = 0x66656470
# Seconds between attempts to take a peer's lock that another process holds.
CLAIM_EVERY = 2.0

_started: threading.Thread | None = None
_starting = threading.Lock()


def start_link() -> None:
    """This process's link thread, started once, if federation is on (a broken configuration raises)."""
    global _started
    if _started is not None or federation() is None:
        return
    with _starting:
        if _started is None:
            _started = threading.Thread(target=_serve, name="messaging-federation", daemon=True)
            _started.start()


def _serve() -> None:
    asyncio.run(serve_peers())


async def serve_peers() -> None:
    found = federation()
    if found is None:
        return
    await asyncio.gather(*(Pusher(peer).run() for peer in found.peers))


def lock_key(peer: str) -> int:
    """The second key of `peer`'s lock: its name's hash, as a 31-bit integer."""
    return int.from_bytes(hashlib.sha256(peer.encode()).digest()[:4], "big") & 0x7FFFFFFF


class Pusher:
    """The pushes to one peer, while this process holds the peer's lock."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.conn: psycopg.AsyncConnection | None = None
        self.leading = False
        self.after = 0
        self.failures = 0

    async def run(self) -> None:
        while True:
            try:
                if not await self.lead():
                    await asyncio.sleep(CLAIM_EVERY)
                    continue
                moved = await self.push()
            except Exception as exc:  # the peer, the database: waited out, never fatal
                self.failures += 1
                metrics.FEDERATION_PUSH_FAILURES.labels(self.peer).inc()
                level = logging.INFO if isinstance(exc, PeerUnavailable) else logging.WARNING
                log.log(level, "pushing to %s: %s: %s (retrying)", self.peer, type(exc).__name__, exc)
                if isinstance(exc, psycopg.Error):
                    await self.disconnect()
                await asyncio.sleep(full_jitter(self.failures, cap=get_settings().FEDERATION_BACKOFF_CAP))
                continue
            if moved is None:
                await asyncio.sleep(get_settings().FEDERATION_POLL_INTERVAL)
            elif not moved:
                # The peer took nothing (catching up on a gap first): ask again a little later.
                self.failures += 1
                await asyncio.sleep(full_jitter(self.failures, cap=get_settings().FEDERATION_BACKOFF_CAP))
            else:
                self.failures = 0

    async def lead(self) -> bool:
        """Whether this process pushes to the peer: it holds the peer's lock (taken now if free)."""
        if self.conn is None or self.conn.closed or self.conn.broken:
            await self.disconnect()
            self.conn = await psycopg.AsyncConnection.connect(**connection_params(), autocommit=True)
        if not self.leading:
            cursor = await self.conn.execute("SELECT pg_try_advisory_lock(%s, %s)", [PUSHER_LOCK, lock_key(self.peer)])
            row = await cursor.fetchone()
            self.leading = bool(row and row[0])
            metrics.FEDERATION_PUSHERS.labels(self.peer).set(1 if self.leading else 0)
            if self.leading:
                log.info("pushing to %s from this process", self.peer)
        return self.leading

    async def push(self) -> bool | None:
        """One round: None when nothing was pending, else whether any cursor moved."""
        conf = get_settings()
        found = federation()
        assert found is not None
        gateway = runtime().gateway
        batch = await pending(
            gateway, self.peer, found.node, self.after, conf.FEDERATION_BATCH, conf.FEDERATION_MAX_BODY // 2
        )
        if not batch.rooms:
            metrics.FEDERATION_LAG.labels(self.peer).set(0)
            return None
        self.after = batch.rooms[-1].room_id
        # Sent even with no change left to send (its events pruned): the peer learns each room's rev.
        answer = await call(self.peer, "/federation/changes", batch.payload())
        taken = {entry.get("room"): entry.get("position") for entry in _rooms(answer)}
        moved: dict[int, int] = {}
        for room in batch.rooms:
            to = room.advanced_to(taken.get(room.slug))
            if to is not None and to > room.cursor:
                moved[room.room_id] = to
        await advance(gateway, self.peer, moved)
        metrics.FEDERATION_PUSHED.labels(self.peer).inc(batch.changes)
        if batch.oldest is not None:
            metrics.FEDERATION_LAG.labels(self.peer).set(max(0.0, time.time() - batch.oldest.timestamp()))
        return bool(moved)

    async def disconnect(self) -> None:
        conn, self.conn = self.conn, None
        if self.leading:
            self.leading = False
            metrics.FEDERATION_PUSHERS.labels(self.peer).set(0)
        if conn is not None:
            try:
                await conn.close()
            except Exception:
                pass


def _rooms(answer: dict[str, Any]) -> list[dict[str, Any]]:
    rooms = answer.get("rooms")
    return [entry for entry in rooms if isinstance(entry, dict)] if isinstance(rooms, list) else []
