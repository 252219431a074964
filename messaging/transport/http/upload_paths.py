"""Which request is an upload: `POST /api/uploads` found by its URL's name, wherever the host mounts `messaging.urls`.

Asked by both refusals of a body too large: `UploadLimit` (upload_limit.py)
and daphne's (messaging/transport/daphne_uploads.py).
"""

from __future__ import annotations

import functools

from django.urls import Resolver404, resolve

UPLOADS = "messaging-api-uploads"


@functools.lru_cache(maxsize=256)
def is_uploads(path: str) -> bool:
    """Whether `path` (a request's, less the root path) is `POST /api/uploads`'s."""
    try:
        return resolve(path).url_name == UPLOADS
    except Resolver404:
        return False
