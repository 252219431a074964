"""How a webhook's POST is signed: Standard Webhooks, and for one more release `Messaging-Signature`.

Standard Webhooks (https://www.standardwebhooks.com), which receivers check
with an existing library (`standardwebhooks` for Python, `Webhook(secret).
verify(body, headers)`, and its siblings in other languages):

    webhook-id: <event_id>
    webhook-timestamp: <unix seconds>
    webhook-signature: v1,<base64 of HMAC-SHA256(key, "<id>.<timestamp>.<body>")>

An endpoint's secret is kept in that standard's form, `whsec_` and the key's
bytes in base64 (`standard_secret`). A secret given in any other form (every
secret of the versions before, and one an operator types) is taken as the
UTF-8 bytes of its text: `whsec_` + base64 of them. The key's bytes are the
same either way, so `Messaging-Signature` (deprecated: the HMAC-SHA256 of
`"<t>.<body>"` with the same key, as Stripe signs) verifies with the secret
a receiver already had.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time

PREFIX = "whsec_"
# Bytes of a new endpoint's key: Standard Webhooks asks for 24 to 64.
NEW_KEY_BYTES = 32
# Deprecated: sent beside the standard's headers for one more release.
MESSAGING_SIGNATURE = "Messaging-Signature"


def new_secret() -> str:
    """A new endpoint's secret, in the standard's form."""
    return PREFIX + base64.b64encode(secrets.token_bytes(NEW_KEY_BYTES)).decode()


def standard_key(secret: str) -> bytes | None:
    """The key of a secret in the standard's form (`whsec_` + base64 of at least one byte); None if it is not."""
    if not secret.startswith(PREFIX):
        return None
    try:
        key = base64.b64decode(secret[len(PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        return None
    return key or None


def standard_secret(secret: str) -> str:
    """`secret` in the standard's form: as it is if it already is, else `whsec_` + base64 of its UTF-8 bytes."""
    if standard_key(secret) is not None:
        return secret
    return PREFIX + base64.b64encode(secret.encode()).decode()


def secret_key(secret: str) -> bytes:
    """The HMAC key of a secret in either form: the same bytes for a text and its `standard_secret`."""
    key = standard_key(secret)
    return key if key is not None else secret.encode()


def standard_headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The Standard Webhooks headers of one POST."""
    mac = hmac.new(secret_key(secret), f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": "v1," + base64.b64encode(mac).decode(),
    }


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """A `Messaging-Signature` (deprecated): `t=<timestamp>,v1=<hex HMAC-SHA256 of "<t>.<body>">`."""
    mac = hmac.new(secret_key(secret), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify(secret: str, header: str, body: bytes, *, tolerance: float = 300.0, now: float | None = None) -> bool:
    """Whether `header` (a Messaging-Signature) signs `body` with `secret`, made within `tolerance` seconds."""
    try:
        parts = dict(part.split("=", 1) for part in header.split(","))
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, timestamp, body), f"t={timestamp},v1={parts.get('v1', '')}")
