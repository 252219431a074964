"""messaging: exactly-once real-time chat over WebSockets for Django Channels.

The layers (docs/ARCHITECTURE.md): `messaging.core` (protocol, command types,
the exactly-once pipeline; no Channels), `messaging.chat` (rooms, posts,
receipts), `messaging.transport` (the Channels consumer, the server adapters,
the fan-out hub), `messaging.ops` (metrics, checks, health, logs, retention).

What a host project uses is importable from here: `messaging.command`, the
decorator that registers a host's own command types (docs/INTEGRATION.md),
its refusals, the pieces of an ASGI application, and `messaging.submit`
(sync) and `messaging.asubmit`, which run one command from a view, a task or
a script, exactly once, and return its ack. Each is loaded on first
use, so importing this package never needs configured Django settings.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any

__version__ = "0.3.0"

# Public name -> the module that defines it.
_PUBLIC = {
    "command": "messaging.core.handlers",
    "CommandContext": "messaging.core.handlers",
    "CommandError": "messaging.core.exceptions",
    "Invalid": "messaging.core.exceptions",
    "Forbidden": "messaging.core.exceptions",
    "joined_room_id": "messaging.chat.rooms",
    "RoomPolicy": "messaging.chat.policy",
    "on_join": "messaging.chat.hooks",
    "on_page": "messaging.chat.hooks",
    "on_replay": "messaging.chat.hooks",
    "websocket_urlpatterns": "messaging.transport.routing",
    "ProtocolRouter": "messaging.transport.routing",
    "PathRouter": "messaging.transport.routing",
    "AuthMiddlewareStack": "messaging.transport.auth",
    "HandshakeThrottle": "messaging.transport.handshakes",
    "OriginValidator": "messaging.transport.origins",
    "SameOriginValidator": "messaging.transport.origins",
    "SocketGate": "messaging.transport.gate",
    "UploadLimit": "messaging.transport.http.upload_limit",
    "StreamRoute": "messaging.transport.stream",
    "allow_protocol_close_codes": "messaging.transport.daphne_compat",
    "defer_autobahn_log_formatting": "messaging.transport.daphne_compat",
    "sweep_only_due_connections": "messaging.transport.daphne_sweeps",
    "ring_uvicorn_pings_on_a_wheel": "messaging.transport.servers.uvicorn_pings",
    "limit_posts_per_address": "messaging.transport.addresses",
    "client_of_scope": "messaging.transport.addresses",
    "client_of_request": "messaging.transport.addresses",
    "client_ip_of_request": "messaging.transport.addresses",
    "submit": "messaging.transport.submitting",
    "asubmit": "messaging.transport.submitting",
}
__all__ = ["__version__", *_PUBLIC]

# The module paths 0.2 documented for host projects, before the layers: each
# old name is the moved module itself (one object, so one registry and one
# set of settings), not a copy. Internal modules moved without an alias.
_MOVED = {
    "messaging.addresses": "messaging.transport.addresses",
    "messaging.auth": "messaging.transport.auth",
    "messaging.daphne_compat": "messaging.transport.daphne_compat",
    "messaging.exceptions": "messaging.core.exceptions",
    "messaging.handlers": "messaging.core.handlers",
    "messaging.handshakes": "messaging.transport.handshakes",
    "messaging.logcontext": "messaging.ops.logcontext",
    "messaging.origins": "messaging.transport.origins",
    "messaging.rooms": "messaging.chat.rooms",
    "messaging.routing": "messaging.transport.routing",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old documented path (`messaging.routing`) and answers with the module it moved to."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> Any:
        return importlib.import_module(_MOVED[spec.name])

    def exec_module(self, module: Any) -> None:
        pass  # already executed under its new name


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    # Last, so it is asked only for names no file answers.
    sys.meta_path.append(_MovedModules())


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'messaging' has no attribute {name!r}")
