"""gunicorn's worker for the demo project: uvicorn's, with the WebSocket options gunicorn has no flags for.

`deploy/gunicorn.conf.py` names it. What each option does, and why these
values, is in docs/OPERATIONS.md ("Serving with uvicorn").
"""

from __future__ import annotations

from uvicorn_worker import UvicornWorker


class Worker(UvicornWorker):
    CONFIG_KWARGS = {
        **UvicornWorker.CONFIG_KWARGS,
        # websockets' Sans-I/O connection: the one the app writes frames to directly.
        "ws": "websockets-sansio",
        # Chat frames are small: compression would cost CPU per frame and memory per socket.
        "ws_per_message_deflate": False,
        # What a client may send in one message: MAX_FRAME_BYTES, with room for the frame's header.
        "ws_max_size": 65536 + 1024,
        # The app reads X-Forwarded-For itself, only from TRUSTED_PROXIES.
        "proxy_headers": False,
    }
