"""Daphne's queue of a connection's events for its application: an `ApplicationQueue`, not an `asyncio.Queue`.

For each connection daphne makes an `asyncio.Queue` (`Server.create_application`)
and hands its `get` to the application as the ASGI `receive`: 3.7 kB while
empty, for the connection's life (messaging/transport/servers/queues.py
says why, and what `ApplicationQueue`, three slots, does instead).

`queue_lightly()` makes daphne's `create_application` the same as daphne 4's
with that queue. It replaces only daphne's own method (a server that another
layer already wraps keeps its queue) and is applied by
`sweep_only_due_connections()` before that wraps it. Under another server,
or a daphne this was not checked on, it does nothing.
"""

from __future__ import annotations

import asyncio
import sys
from functools import partial
from typing import Any

from .servers.queues import ApplicationQueue
from .versions import checked_daphne


def queue_lightly() -> None:
    """Make daphne's `create_application` give each connection an `ApplicationQueue`; once, under daphne 4 only."""
    server_module = sys.modules.get("daphne.server")
    if server_module is None or not checked_daphne():
        return
    Server = server_module.Server
    daphnes = Server.create_application
    if getattr(daphnes, "__module__", None) != "daphne.server":
        return  # already this module's, or another layer's around daphne's: left as it is

    def create_application(self: Any, protocol: Any, scope: dict[str, Any]) -> ApplicationQueue | None:
        # Daphne 4's, with the lighter queue.
        assert "application_instance" not in self.connections[protocol]
        queue = ApplicationQueue()
        scope.setdefault("asgi", {"version": "3.0"})
        application = self.application(scope=scope, receive=queue.get, send=partial(self.handle_reply, protocol))
        if protocol not in self.connections:
            return None
        self.connections[protocol]["application_instance"] = asyncio.ensure_future(
            application, loop=asyncio.get_event_loop()
        )
        return queue

    Server.create_application = create_application
