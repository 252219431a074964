"""The bench's ASGI app: the full path and the two yardsticks on one server stack.

`/ws/` is the project's consumer behind the project's handshake layer,
exactly as `project.asgi` serves it; `/echo/` the ceiling and
`/tutorial/<room>/` the tutorial pattern, behind the plain Channels stack a
tutorial uses (channels' origin validator, cookie, session and auth
middleware). Only the benchmark serves this module.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import path  # noqa: E402

from messaging.conf import get_settings  # noqa: E402
from messaging.ops.loopwatch import tune_collector  # noqa: E402
from messaging.transport.consumers import ChatConsumer  # noqa: E402
from messaging.transport.daphne_compat import allow_protocol_close_codes, defer_autobahn_log_formatting  # noqa: E402
from messaging.transport.daphne_sweeps import sweep_only_due_connections  # noqa: E402
from messaging.transport.gate import SocketGate  # noqa: E402
from messaging.transport.routing import PathRouter, ProtocolRouter  # noqa: E402
from messaging.transport.servers.uvicorn_pings import ring_uvicorn_pings_on_a_wheel  # noqa: E402

from .consumers import EchoConsumer, TutorialConsumer  # noqa: E402

# The server as `project.asgi` sets it up, for every configuration alike.
allow_protocol_close_codes()
defer_autobahn_log_formatting()
sweep_only_due_connections()
ring_uvicorn_pings_on_a_wheel()


def plain_channels(consumer):
    """What a Channels tutorial puts around its consumer."""
    return AllowedHostsOriginValidator(AuthMiddlewareStack(consumer))


# The project's routers (messaging/transport/routing.py), which keep nothing of
# their own while a socket lives; the gate's router hands `/ws/` to the consumer
# as `project.asgi`'s does, so an idle socket here keeps what one there keeps.
application = ProtocolRouter(
    {
        "http": django_asgi_app,
        "websocket": PathRouter(
            [
                path("ws/", SocketGate(PathRouter([path("", ChatConsumer.as_asgi())]))),
                path("echo/", plain_channels(EchoConsumer.as_asgi())),
                path("tutorial/<slug:room>/", plain_channels(TutorialConsumer.as_asgi())),
            ]
        ),
    }
)

# What exists now (Django, the apps, the routing) lives as long as the
# process: frozen (`GC_FREEZE`), the collector's full passes skip it and scan
# only what the server allocates from here on. A full pass over the whole heap
# stopped the event loop, and every socket with it, for 54-104 ms; frozen, for
# 3-5 ms (docs/PERFORMANCE.md). The app's `ready()` froze what existed then.
tune_collector(get_settings())
