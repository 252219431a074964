"""A file's name as its uploader gives it (`Upload-Filename`, URL-encoded): what is taken.

The name is shown and offered for saving (`Content-Disposition`), never
used as a path: the storage keeps the file under a name of the app's own.
Still, a name that is a path (`../../etc/passwd`, `a/b`, `a\\b`) or that
hides what it is (control characters, a NUL, the bidirectional overrides
that make `gpj.exe` read as `exe.jpg`) is refused rather than cleaned: its
sender learns at once, and no one downstream meets it.
"""

from __future__ import annotations

import unicodedata
from urllib.parse import unquote

NAME_CHARS = 255
# Unicode's controls, surrogates and line and paragraph separators.
REFUSED_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})
# The bidirectional marks, embeddings, overrides and isolates.
BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class BadName(Exception):
    """The `Upload-Filename` header is missing or names no file this server takes (400)."""


def upload_filename(header: str | None) -> str:
    """The name `header` encodes, or `BadName` saying why it is refused."""
    if not header:
        raise BadName("send the file's name in Upload-Filename (URL-encoded)")
    if not header.isascii():
        raise BadName("Upload-Filename must be URL-encoded (ASCII)")
    try:
        name = unquote(header, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        raise BadName("Upload-Filename is not URL-encoded UTF-8") from None
    if not 1 <= len(name) <= NAME_CHARS:
        raise BadName(f"the file's name must be 1-{NAME_CHARS} characters")
    if "/" in name or "\\" in name or name.strip(". ") == "":
        raise BadName("the file's name may not be a path")
    if any(char in BIDI or unicodedata.category(char) in REFUSED_CATEGORIES for char in name):
        raise BadName("the file's name may not hold control characters")
    return name
