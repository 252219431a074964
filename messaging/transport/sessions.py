"""Whether a socket's session still signs its user in.

The same decision as `django.contrib.auth.get_user`, without its writes: on a
hash that only a fallback secret verifies, `get_user` rotates the session key
(the socket's browser would keep the old one and be logged out), and on a
stale hash it deletes the session. A periodic check from a socket must only
read; the next HTTP request does the rest, as it always did.
"""
from __future__ import annotations

import asyncio
import logging
import random
from importlib import import_module
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, load_backend
from django.utils.crypto import constant_time_compare

from ..core.runtime import runtime
from .closes import CLOSE_UNAUTHENTICATED

if TYPE_CHECKING:
    from .consumers import ChatConsumer

log = logging.getLogger("messaging.transport.consumers")


def session_still_signs_in(session_key: str, user: Any) -> bool:
    """False once the session was logged out, flushed or expired, the user is
    gone or inactive, or a password change invalidated the session's hash."""
    session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user_id, backend_path = session.get(SESSION_KEY), session.get(BACKEND_SESSION_KEY)
    if user_id is None or str(user_id) != str(user.pk) or backend_path not in settings.AUTHENTICATION_BACKENDS:
        return False
    current = load_backend(backend_path).get_user(user.pk)
    if current is None:
        return False
    if not hasattr(current, "get_session_auth_hash"):
        return True
    given = session.get(HASH_SESSION_KEY) or ""
    hashes = [current.get_session_auth_hash(), *current.get_session_auth_fallback_hash()]
    return bool(given) and any(constant_time_compare(given, expected) for expected in hashes)


class SessionWatch:
    """One periodic check of a session for all the sockets it signed in.

    Every socket of a session (a browser's tabs, reconnects) shares one task,
    so a process reads each session once per interval, however many sockets
    it holds: 5,000 sockets of one session cost one read per interval, not
    5,000 reads on the database thread that also serves sign-ins. Once the
    session stops signing the user in (logout elsewhere), every socket of it
    is closed with 4401, within the interval plus one check.
    """

    _watches: dict[tuple[str, Any], "SessionWatch"] = {}

    def __init__(self, key: tuple[str, Any], user: Any, interval: float) -> None:
        self.key = key
        self.user = user
        self.interval = interval
        self.sockets: set[ChatConsumer] = set()
        self.task = asyncio.create_task(self.run())

    @classmethod
    def join(cls, socket: "ChatConsumer", session_key: str, interval: float) -> "SessionWatch":
        key = (session_key, socket.user.pk)
        watch = cls._watches.get(key)
        if watch is None or watch.task.done() or watch.task.get_loop() is not asyncio.get_running_loop():
            watch = cls._watches[key] = cls(key, socket.user, interval)
        watch.sockets.add(socket)
        return watch

    def leave(self, socket: "ChatConsumer") -> None:
        self.sockets.discard(socket)
        if not self.sockets:
            self.task.cancel()
            if self._watches.get(self.key) is self:
                del self._watches[self.key]

    async def run(self) -> None:
        # Jitter spreads the checks of sessions that connected together.
        await asyncio.sleep(random.uniform(0, self.interval))
        while True:
            try:
                # On the commands' threads: channels' one database thread also
                # signs in every new socket, and must not queue behind checks.
                valid = await runtime().gateway.run(session_still_signs_in, self.key[0], self.user)
            except Exception:
                # A storage outage is not a logout: keep the sockets, ask again later.
                log.warning("session check failed for user %s", self.user.pk, exc_info=True)
                valid = True
            if not valid:
                if self._watches.get(self.key) is self:
                    del self._watches[self.key]
                for socket in list(self.sockets):
                    try:
                        await socket.close(code=CLOSE_UNAUTHENTICATED)
                    except Exception:
                        # A socket whose client is already gone (uvicorn raises
                        # then) must not keep the session's other sockets open.
                        log.warning("closing a socket of user %s failed", self.user.pk, exc_info=True)
                return
            await asyncio.sleep(self.interval)
