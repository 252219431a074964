"""Which content types an upload may have, and whether its bytes are of the type it says.

PROTOCOL.md 1.2: `text/plain`, `application/pdf`, `image/png`,
`image/jpeg`, `image/gif` and `image/webp` are always taken; a deployment
adds others (`UPLOAD_TYPES`); any other type is refused (415).

The type is the request's `Content-Type`, and the bytes must agree with it:
a type with a signature here must start with it (a "PNG" that is not one is
refused), and no other type may carry bytes that start with one of these
signatures (a PNG sent as `text/plain`). Text (`text/*`) holds no NUL byte.
Five signatures, one line each, rather than a library's hundreds of
guesses: the refusal is only as good as the few types it must tell apart,
and each can be read here.

Only the raster images whose bytes were checked (`INLINE`) are shown
inline; everything else, SVG and HTML included where a deployment allows
them, is served as an attachment (messaging/transport/http/downloads.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from django.core.exceptions import ImproperlyConfigured

ALWAYS_ALLOWED = frozenset({"text/plain", "application/pdf", "image/png", "image/jpeg", "image/gif", "image/webp"})
# Shown in a page as an `img`: raster formats that run nothing. SVG is not one.
INLINE = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# Never taken, whatever a deployment allows: Django reads such a body as a form
# (its CSRF check would read the whole of it), and a file is not a form.
FORMS = frozenset({"multipart/form-data", "application/x-www-form-urlencoded"})
# RFC 6838's restricted names, lower-cased.
MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,62}/[a-z0-9][a-z0-9!#$&^_.+-]{0,62}")
# How much of the start of the bytes the signatures need (a PDF's header may come after some junk).
HEAD_BYTES = 1024

SIGNATURES: dict[str, Callable[[bytes], bool]] = {
    "image/png": lambda head: head.startswith(b"\x89PNG\r\n\x1a\n"),
    "image/jpeg": lambda head: head.startswith(b"\xff\xd8\xff"),
    "image/gif": lambda head: head[:6] in (b"GIF87a", b"GIF89a"),
    "image/webp": lambda head: head[:4] == b"RIFF" and head[8:12] == b"WEBP",
    # Readers take the header anywhere in the first 1,024 bytes.
    "application/pdf": lambda head: b"%PDF-" in head[:HEAD_BYTES],
}


class Refused(Exception):
    """The type is not taken here, or the bytes are not of it (415)."""


def media_type(header: str | None) -> str:
    """The type of a `Content-Type` header (its parameters dropped, lower-cased), or `Refused`."""
    kind = (header or "").split(";", 1)[0].strip().lower()
    if not MEDIA_TYPE.fullmatch(kind):
        raise Refused("send the file's type as Content-Type (type/subtype)")
    return kind


def allowed_types(extra: Iterable[str]) -> frozenset[str]:
    """The types taken: the protocol's own and a deployment's `extra`, never a form's."""
    return (ALWAYS_ALLOWED | frozenset(extra)) - FORMS


def check_allowed(kind: str, allowed: frozenset[str]) -> None:
    if kind not in allowed:
        raise Refused(f"{kind} is not a type this server takes (it takes {', '.join(sorted(allowed))})")


def sniffed(head: bytes) -> str | None:
    """The type whose signature `head` starts with, if any."""
    return next((kind for kind, matches in SIGNATURES.items() if matches(head)), None)


def check_head(kind: str, head: bytes) -> None:
    """`Refused` unless the first bytes (`head`, up to `HEAD_BYTES`) agree with `kind`."""
    found = sniffed(head)
    if kind in SIGNATURES and found != kind:
        raise Refused(f"the bytes are not {kind}")
    if found is not None and found != kind:
        raise Refused(f"the bytes are {found}, not {kind}")


def is_text(kind: str) -> bool:
    """Whether bytes of `kind` are text, which holds no NUL byte."""
    return kind.startswith("text/")


def shown_inline(kind: str) -> bool:
    return kind in INLINE


def upload_types(given: str | Iterable[str] | None) -> tuple[str, ...]:
    """An `UPLOAD_TYPES` value (a comma-separated string or a list) as lower-cased types; a malformed
    one raises `ImproperlyConfigured`, as a type no request could ever match would be a silent no."""
    entries = (given or "").split(",") if isinstance(given, str) or given is None else list(given)
    kinds = tuple(sorted({str(entry).strip().lower() for entry in entries if str(entry).strip()}))
    for kind in kinds:
        if not MEDIA_TYPE.fullmatch(kind):
            raise ImproperlyConfigured(f"UPLOAD_TYPES: {kind!r} is not a content type (type/subtype)")
    return kinds
