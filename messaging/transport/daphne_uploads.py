"""Under daphne, an upload whose `Content-Length` is over `MAX_UPLOAD_BYTES` refused before its body is read.

Daphne serves HTTP through Twisted, which reads a request's whole body (into
a temporary file) before daphne calls the application: `UploadLimit`
(messaging/transport/http/upload_limit.py) would refuse a 100 MiB upload
only once all of it had arrived. So Twisted's request is told: when its
headers are in and `gotLength` learns the body's length, a `POST` to
`/api/uploads` (the URL's name, as `UploadLimit` finds it) over the limit is
answered 413 on the connection, which is closed: Twisted stops reading it,
the application never sees it, and the client's further bytes are refused
by the closed socket. An `Expect: 100-continue` is dropped first, so no
"100 Continue" follows the 413. A body without a length (chunked) or within
it goes on as before, to the application and `UploadLimit`.

`refuse_large_uploads_early()` changes daphne only if it is loaded, as
messaging/transport/daphne_compat.py does; `UploadLimit` calls it as it is
made (daphne imports itself, then the application).
"""

from __future__ import annotations

import io
import sys
from typing import Any
from urllib.parse import unquote

from ..conf import get_settings
from ..core.protocol import encode


def refuse_large_uploads_early() -> None:
    module = sys.modules.get("daphne.http_protocol")
    if module is None:  # another server, or daphne not loaded: nothing to change
        return
    WebRequest = module.WebRequest
    original = WebRequest.gotLength
    if getattr(original, "refuses_uploads", False):
        return

    def gotLength(self: Any, length: int | None) -> None:
        limit = get_settings().MAX_UPLOAD_BYTES
        if length is not None and length > limit and _is_upload(self.channel):
            self.requestHeaders.removeHeader(b"expect")
            body = encode(
                {
                    "t": "error",
                    "error": {"code": "too_large", "message": f"the file is over MAX_UPLOAD_BYTES ({limit} bytes)"},
                }
            ).encode()
            self.channel.transport.write(
                b"HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            # Stops reading: the rest of the body is never taken in.
            self.channel.transport.loseConnection()
            self.content = io.BytesIO()
            return
        original(self, length)

    gotLength.refuses_uploads = True  # type: ignore[attr-defined]
    WebRequest.gotLength = gotLength


def _is_upload(channel: Any) -> bool:
    from .http.upload_paths import is_uploads

    command, path = getattr(channel, "_command", None), getattr(channel, "_path", None)
    if command != b"POST" or not isinstance(path, bytes):
        return False
    return is_uploads(unquote(path.split(b"?", 1)[0].decode("latin-1")))
