"""`UploadLimit`: an upload over `MAX_UPLOAD_BYTES` refused (413) before Django reads its body.

Django's ASGI handler reads a request's whole body (into memory, then a
temporary file) before any middleware or view runs. So a view cannot refuse
a 100 MiB upload before it has arrived. This layer, in front of Django's
HTTP application, does it for `POST /api/uploads` (found by its URL's name,
`messaging-api-uploads`, wherever the host mounts `messaging.urls`):

- a `Content-Length` over the limit: 413 at once, the body never asked for
  (`Connection: close`; the server drops what the client still sends);
- a body without one (chunked), or one that turns out longer: counted as
  the server hands it on; the message that passes the limit ends the
  request for Django (it gets `http.disconnect`, and stops without
  answering or keeping anything) and the layer answers 413 in its place.

Every other request passes untouched. The server must stream the body to
the application for the first to save any reading: uvicorn (and gunicorn
with its workers) and hypercorn do. Daphne, through Twisted, reads the
whole body before it calls the application; made under daphne, the layer
has Twisted refuse such a request as soon as its headers are in
(messaging/transport/daphne_uploads.py). In front of any server, the
proxy's own limit keeps out what no upload may be (nginx's
`client_max_body_size`, deploy/nginx/messaging.conf; docs/OPERATIONS.md).

    application = ProtocolTypeRouter({"http": UploadLimit(get_asgi_application()), ...})
"""

from __future__ import annotations

from typing import Any

from asgiref.typing import ASGIReceiveCallable, ASGISendCallable

from ...conf import get_settings
from ...core.protocol import encode
from ..daphne_uploads import refuse_large_uploads_early
from .upload_paths import UPLOADS, is_uploads

__all__ = ["UPLOADS", "UploadLimit", "is_uploads"]

Scope = dict[str, Any]


def path_info(scope: Scope) -> str:
    """The request's path less the root path, as Django resolves it."""
    path, root = scope["path"], scope.get("root_path", "")
    return str(path[len(root) :] if root and path.startswith(root) else path)


def content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def refuse(send: ASGISendCallable, limit: int) -> None:
    body = encode(
        {"t": "error", "error": {"code": "too_large", "message": f"the file is over MAX_UPLOAD_BYTES ({limit} bytes)"}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
            "trailers": False,
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


class UploadLimit:
    """ASGI middleware for the HTTP application: uploads over `MAX_UPLOAD_BYTES` stop here."""

    def __init__(self, app: Any) -> None:
        self.app = app
        # Daphne reads a body before the application sees it: it is told to refuse one that says it is too large.
        refuse_large_uploads_early()

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not is_uploads(path_info(scope)):
            await self.app(scope, receive, send)
            return
        limit = get_settings().MAX_UPLOAD_BYTES
        length = content_length(scope)
        if length is not None and length > limit:
            await refuse(send, limit)
            return
        received = 0
        over = False
        started = False

        async def counted() -> Any:
            nonlocal received, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def watched(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, counted, watched)
        if over and not started:
            await refuse(send, limit)
