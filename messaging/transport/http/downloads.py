"""`GET` of an upload's `url`: its bytes, to those who may have them (PROTOCOL.md 1.2, "Files").

Who may is messaging/files/access.py: the members of the room it was posted
in; before it is posted, its uploader. Anyone else gets 404, as for a file
that never was, signed in or not.

The bytes go out as stored, streamed from the storage in chunks (an
asynchronous iterator: Django serves a file's synchronous one under ASGI by
reading it whole first), with the type it was checked for and
`X-Content-Type-Options: nosniff`. Only the raster images of
messaging/files/kinds.py are `inline`; anything else, SVG and HTML
included, is an `attachment`, and a `Content-Security-Policy` of
`sandbox` keeps even an opened one from running anything. One range
(`Range: bytes=a-b`) is served as 206: a video or a resumed download needs
no more. `Cache-Control: private, no-cache` with the digest as `ETag`: a
browser asks again each time (a deleted message's files are gone at once)
and gets 304 for what it has.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import IO, TypeVar
from uuid import UUID

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_safe

from ...core.exceptions import CommandError
from ...core.runtime import runtime
from ...files import kinds
from ...files.access import fetchable
from ...files.models import Upload
from ...files.storage import CHUNK, upload_storage
from .credentials import Unauthenticated, caller
from .views import error_response

R = TypeVar("R", bound=HttpResponseBase)
RANGE = re.compile(r"bytes=(\d*)-(\d*)")
# What no file served here may do, even opened on its own.
SANDBOX = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox"


def not_found() -> HttpResponse:
    return error_response(404, "not_found", "no such file")


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The one range (first, last) that `header` asks of `size` bytes; None for the whole file."""
    found = RANGE.fullmatch((header or "").strip())
    if found is None or size == 0:
        return None
    first, last = found.groups()
    if not first:
        if not last:
            return None
        return max(0, size - int(last)), size - 1
    return int(first), min(int(last), size - 1) if last else size - 1


async def chunks(file: IO[bytes], first: int, length: int) -> AsyncIterator[bytes]:
    try:
        if first:
            await asyncio.to_thread(file.seek, first)
        while length > 0:
            chunk = await asyncio.to_thread(file.read, min(CHUNK, length))
            if not chunk:
                break
            length -= len(chunk)
            yield chunk
    finally:
        await asyncio.to_thread(file.close)


def headers_of(upload: Upload, response: R) -> R:
    response["Content-Type"] = upload.content_type
    response["Content-Disposition"] = content_disposition_header(
        not kinds.shown_inline(upload.content_type), upload.name
    ) or ("inline" if kinds.shown_inline(upload.content_type) else "attachment")
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = SANDBOX
    response["Cache-Control"] = "private, no-cache"
    response["ETag"] = f'"{upload.digest}"'
    response["Accept-Ranges"] = "bytes"
    return response


@require_safe
async def download(request: HttpRequest, upload: str) -> HttpResponseBase:
    """The bytes of the upload `upload`, or 404."""
    try:
        who = await caller(request)
        upload_id = UUID(upload)
    except (Unauthenticated, CommandError, ValueError):
        return not_found()
    found = await runtime().gateway.run(fetchable, who.user, upload_id)
    if found is None:
        return not_found()
    if request.headers.get("If-None-Match") == f'"{found.digest}"':
        return headers_of(found, HttpResponse(status=304))
    wanted = byte_range(request.headers.get("Range"), found.size)
    if wanted is not None and wanted[0] > wanted[1]:
        unsatisfiable = headers_of(found, HttpResponse(status=416))
        unsatisfiable["Content-Range"] = f"bytes */{found.size}"
        return unsatisfiable
    first, last = wanted or (0, found.size - 1)
    length = last - first + 1 if found.size else 0
    status = 206 if wanted else 200
    response: HttpResponseBase
    if request.method == "HEAD":
        response = headers_of(found, HttpResponse(status=status))
    else:
        try:
            file = await asyncio.to_thread(upload_storage().open, found.file, "rb")
        except FileNotFoundError:
            return not_found()
        response = headers_of(found, StreamingHttpResponse(chunks(file, first, length), status=status))
    response["Content-Length"] = str(length)
    if wanted:
        response["Content-Range"] = f"bytes {first}-{last}/{found.size}"
    return response
