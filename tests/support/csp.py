"""Reading a Content-Security-Policy and the inline scripts it must allow."""

from __future__ import annotations

import base64
import hashlib
import re

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)([^>]*)>(.*?)</script>", re.S)


def policy_of(header: str) -> dict[str, list[str]]:
    """The header's directives, each with its sources in order."""
    directives = (part.strip().split() for part in header.split(";"))
    return {name: sources for name, *sources in directives}


def executed_inline_scripts(html: str) -> list[str]:
    """Inline scripts a browser runs or parses under script-src: all but JSON data blocks."""
    return [body for attrs, body in INLINE_SCRIPT.findall(html) if 'type="application/json"' not in attrs]


def sha256_source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"
