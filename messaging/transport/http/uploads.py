"""`POST /api/uploads`: a file, stored once per key (PROTOCOL.md 1.2, "Files").

The raw body is the file, `Content-Type` its type, `Upload-Filename` its
name (URL-encoded), `Idempotency-Key` the upload's id of the client's
making (the rules of a command's id). Credentials and rate limits are those
of `POST /api/commands` (messaging/transport/http/credentials.py).

In order, each refusal changing nothing: a form's body is refused before
anything reads it (415), then the caller (401, 403), the key (400), the
rate (429), the name (400), the type (415), a `Content-Length` over
`MAX_UPLOAD_BYTES` (413). A key that has its upload already reads the bytes
only to compare them: the same answer 200 (`Idempotent-Replayed: true`),
other bytes 422. Then the user's bounds (429), and the bytes: streamed to
the storage (messaging/files/storage.py), refused as they come if they are
too many (413) or not of their type (415), and recorded
(messaging/files/uploads.py): 201, or, where a request with the same key
recorded its own first (two at once, on any processes), that one's answer
and this request's file removed.

`UploadLimit` (messaging/transport/http/upload_limit.py), in front of
Django, refuses a body that is too large before Django reads it; without
it, this view still refuses it, once Django has read it.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt

from ...conf import get_settings
from ...core.exceptions import CommandError
from ...core.protocol import COMMAND_ID, encode
from ...core.runtime import runtime
from ...files import kinds
from ...files.models import Upload
from ...files.names import BadName, upload_filename
from ...files.storage import BodyReader, Stored, TooLarge, remove_files, store
from ...files.uploads import OverBounds, check_bounds, find, record, shown
from ...ids import uuid7
from ..submitting import ID_RULE
from .credentials import Unauthenticated, caller, check_rate
from .views import error_response

log = logging.getLogger(__name__)


def too_large(limit: int) -> HttpResponse:
    return error_response(413, "too_large", f"the file is over MAX_UPLOAD_BYTES ({limit} bytes)", Connection="close")


def declared_length(request: HttpRequest) -> int | None:
    try:
        return int(request.headers["Content-Length"])
    except (KeyError, ValueError):
        return None


def uploaded(upload: Upload, status: int) -> HttpResponse:
    response = HttpResponse(encode(shown(upload)), status=status, content_type="application/json")
    if status == 200:
        response["Idempotent-Replayed"] = "true"
    return response


def same_or_reused(upload: Upload, digest: str) -> HttpResponse:
    """The answer to a key that has its upload: the original's, for the same bytes; else 422."""
    if digest != upload.digest:
        return error_response(422, "id_reused", "this Idempotency-Key was used for other bytes")
    return uploaded(upload, 200)


def digest_of(request: HttpRequest, limit: int) -> str:
    reader = BodyReader(request, limit)
    reader.drain()
    return reader.digest


def receive(request: HttpRequest, kind: str, limit: int, upload_id: Any) -> Stored:
    """The body, checked against `kind` from its first bytes on, in the storage as the file of `upload_id`."""
    reader = BodyReader(request, limit)
    kinds.check_head(kind, reader.head())
    stored = store(reader, upload_id)
    if kinds.is_text(kind) and stored.saw_nul:
        remove_files([stored.file])
        raise kinds.Refused(f"the bytes are not {kind}: text holds no NUL byte")
    return stored


@csrf_exempt  # checked in `caller` for the session alone, as for /api/commands
@never_cache
async def uploads(request: HttpRequest) -> HttpResponse:
    """`POST /api/uploads`: one file; 201 with the upload, 200 for its key again."""
    if request.method != "POST":
        response = error_response(405, "method_not_allowed", "POST a file as the body")
        response["Allow"] = "POST"
        return response
    conf = get_settings()
    try:
        kind = kinds.media_type(request.headers.get("Content-Type"))
        if kind in kinds.FORMS:
            raise kinds.Refused(f"{kind} is a form: send the file's own bytes and type")
    except kinds.Refused as exc:
        return error_response(415, "unsupported_type", str(exc))
    try:
        who = await caller(request)
    except Unauthenticated as exc:
        return error_response(401, "unauthenticated", str(exc.__doc__), WWW_Authenticate='Bearer realm="messaging"')
    except CommandError as exc:  # a session without its CSRF token
        return error_response(403, exc.code, exc.message)
    key = request.headers.get("Idempotency-Key")
    if key is None or not COMMAND_ID.fullmatch(key):
        return error_response(400, "bad_frame", f"Idempotency-Key: {ID_RULE}")
    try:
        await check_rate(who)
    except CommandError as exc:
        wait = exc.extra.get("retry_after")
        seconds = str(max(1, math.ceil(wait))) if isinstance(wait, (int, float)) else "1"
        return error_response(429, exc.code, exc.message, Retry_After=seconds)
    try:
        name = upload_filename(request.headers.get("Upload-Filename"))
        kinds.check_allowed(kind, kinds.allowed_types(conf.UPLOAD_TYPES))
    except BadName as exc:
        return error_response(400, "invalid", str(exc))
    except kinds.Refused as exc:
        return error_response(415, "unsupported_type", str(exc))
    limit = conf.MAX_UPLOAD_BYTES
    length = declared_length(request)
    if length is not None and length > limit:
        return too_large(limit)
    try:
        return await store_once(request, who.user, key, name, kind, length or 0, limit)
    except TooLarge:
        return too_large(limit)
    except kinds.Refused as exc:
        return error_response(415, "unsupported_type", str(exc))
    except OverBounds as exc:
        return error_response(429, "rate_limited", str(exc), Retry_After=str(exc.retry_after))
    except (DatabaseError, OSError) as exc:
        log.warning("an upload failed in storage: %s", exc)
        return error_response(503, "unavailable", "storage failed; nothing was kept", Retry_After="1")


async def store_once(
    request: HttpRequest, user: Any, key: str, name: str, kind: str, length: int, limit: int
) -> HttpResponse:
    gateway = runtime().gateway
    existing = await gateway.run(find, user, key)
    if existing is not None:
        return same_or_reused(existing, await asyncio.to_thread(digest_of, request, limit))
    await gateway.run(check_bounds, user, length)
    stored = await asyncio.to_thread(receive, request, kind, limit, uuid7())
    try:
        recorded = await gateway.run(record, user, key, name, kind, stored)
    except BaseException:
        await asyncio.to_thread(remove_files, [stored.file])
        raise
    if not recorded.created:
        # Another request with this key recorded its file first: this one's is not needed.
        await asyncio.to_thread(remove_files, [stored.file])
        return same_or_reused(recorded.upload, stored.digest)
    return uploaded(recorded.upload, 201)
