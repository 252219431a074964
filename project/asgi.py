"""ASGI entry point: `daphne project.asgi:application`."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
# Django must be set up before anything imports models (the consumer does).
django_asgi_app = get_asgi_application()

from messaging.conf import get_settings  # noqa: E402
from messaging.federation import start as start_federation  # noqa: E402
from messaging.ops.loopwatch import tune_collector  # noqa: E402
from messaging.transport.daphne_compat import allow_protocol_close_codes, defer_autobahn_log_formatting  # noqa: E402
from messaging.transport.daphne_sweeps import sweep_only_due_connections  # noqa: E402
from messaging.transport.gate import SocketGate  # noqa: E402
from messaging.transport.http.upload_limit import UploadLimit  # noqa: E402
from messaging.transport.routing import PathRouter, ProtocolRouter, websocket_urlpatterns  # noqa: E402
from messaging.transport.servers.uvicorn_pings import ring_uvicorn_pings_on_a_wheel  # noqa: E402
from messaging.transport.stream import StreamRoute  # noqa: E402

# Without this, daphne turns the protocol's 1003, 1008 and 1009 closes into 1011.
allow_protocol_close_codes()
# Autobahn formats its debug lines' arguments on every frame, logged or not.
defer_autobahn_log_formatting()
# Daphne walks every connection each second and every two: only what is due is visited.
sweep_only_due_connections()
# Uvicorn arms a timer a socket for its pings: one timer a second rings all those due, the first pings included.
ring_uvicorn_pings_on_a_wheel()

# Channels' routers, handing each connection over rather than awaiting it
# for its whole life (messaging/transport/routing.py).
application = ProtocolRouter(
    {
        # An upload over MAX_UPLOAD_BYTES is refused before Django reads its body.
        # GET /api/stream: server-sent events, served beside Django (messaging/transport/stream.py).
        "http": StreamRoute(UploadLimit(django_asgi_app)),
        # Handshakes per client address (CONNECT_RATE), the origin by scheme, host and port
        # (CSRF_TRUSTED_ORIGINS, else the handshake's own), then the session's or API token's
        # user: one layer, messaging/transport/gate.py.
        "websocket": SocketGate(PathRouter(websocket_urlpatterns)),
    }
)

# With MESSAGING_NODE set, this process pushes shared rooms' changes to its peers (docs/FEDERATION.md).
start_federation()

# What exists now (Django, the apps, the routing) lives as long as the
# process: frozen (`GC_FREEZE`), the collector's full passes skip it and scan
# only what the server allocates from here on. A full pass over the whole heap
# stopped the event loop, and every socket with it, for 54-104 ms; frozen, for
# 3-5 ms (docs/PERFORMANCE.md). The app's `ready()` froze what existed then.
tune_collector(get_settings())
