"""Files for the uploads' tests: the smallest bytes of each type the server takes, and how to send them.

Each sample starts with its type's signature and nothing else is checked
(messaging/files/kinds.py): these are what a client sends, not images a
browser could draw; `PNG_PIXEL` is one that it can.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from urllib.parse import quote

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(64)
JPEG = b"\xff\xd8\xff\xe0" + bytes(64)
GIF = b"GIF89a" + bytes(64)
WEBP = b"RIFF\x00\x00\x00\x00WEBPVP8 " + bytes(64)
PDF = b"%PDF-1.7\n" + bytes(64)
TEXT = "plain words, and é\n".encode()
# A 1x1 red PNG a browser draws.
PNG_PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
SAMPLES = {
    "image/png": PNG,
    "image/jpeg": JPEG,
    "image/gif": GIF,
    "image/webp": WEBP,
    "application/pdf": PDF,
    "text/plain": TEXT,
}


def upload_headers(
    name: str, content_type: str, key: str | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The headers of `POST /api/uploads` for a file `name` of `content_type` (the key minted if not given)."""
    return {
        "Content-Type": content_type,
        "Upload-Filename": quote(name, safe=""),
        "Idempotency-Key": key or uuid.uuid4().hex,
        **(extra or {}),
    }
