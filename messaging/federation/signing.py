"""The signature of a request between peers (docs/FEDERATION.md, "Signing"): pure, no Django.

    Messaging-Node: <the sender>
    Messaging-Timestamp: <unix seconds>
    Messaging-Signature: v1=<hex of HMAC-SHA256(secret, "<timestamp>.<sender>.<receiver>." + body)>

The pair's one secret signs both directions, so the receiver's name is in
the signed text: a request cannot be sent back to the peer that sent it.
A timestamp more than `TOLERANCE` seconds from the receiver's clock is
refused, and the signatures are compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Callable, Mapping

NODE_HEADER = "Messaging-Node"
TIMESTAMP_HEADER = "Messaging-Timestamp"
SIGNATURE_HEADER = "Messaging-Signature"
# Seconds a request's timestamp may be from the receiver's clock, either way.
TOLERANCE = 300
TIMESTAMP = re.compile(r"[0-9]{1,12}")
SIGNATURE = re.compile(r"v1=([0-9a-f]{64})")


class BadSignature(Exception):
    """The request is not signed by a peer with the secret this deployment shares with it."""


def signature(secret: bytes, timestamp: int, sender: str, receiver: str, body: bytes) -> str:
    signed = f"{timestamp}.{sender}.{receiver}.".encode() + body
    return "v1=" + hmac.new(secret, signed, hashlib.sha256).hexdigest()


def signed_headers(secret: bytes, sender: str, receiver: str, body: bytes, now: float | None = None) -> dict[str, str]:
    """The headers that sign `body`, sent by `sender` to `receiver`."""
    timestamp = int(time.time() if now is None else now)
    return {
        NODE_HEADER: sender,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(secret, timestamp, sender, receiver, body),
    }


def verify(
    headers: Mapping[str, str],
    body: bytes,
    receiver: str,
    secret_of: Callable[[str], bytes | None],
    now: float | None = None,
) -> str:
    """The sending peer's name if `headers` sign `body` for `receiver`; else `BadSignature`.

    `secret_of(name)` is the secret shared with the peer `name`, None for a
    node that is no peer. `headers` is looked up by the names above as given
    (a Django request's `headers` is case-insensitive).
    """
    sender = headers.get(NODE_HEADER) or ""
    secret = secret_of(sender)
    if secret is None:
        raise BadSignature(f"{NODE_HEADER}: no peer of this deployment")
    stamp = headers.get(TIMESTAMP_HEADER) or ""
    if not TIMESTAMP.fullmatch(stamp):
        raise BadSignature(f"{TIMESTAMP_HEADER}: unix seconds")
    timestamp = int(stamp)
    if abs((time.time() if now is None else now) - timestamp) > TOLERANCE:
        raise BadSignature(f"{TIMESTAMP_HEADER}: more than {TOLERANCE} s from this server's clock")
    given = SIGNATURE.fullmatch(headers.get(SIGNATURE_HEADER) or "")
    if given is None:
        raise BadSignature(f"{SIGNATURE_HEADER}: v1= and 64 hex digits")
    expected = signature(secret, timestamp, sender, receiver, body)
    if not hmac.compare_digest(expected, f"v1={given.group(1)}"):
        raise BadSignature("the signature does not match")
    return sender
