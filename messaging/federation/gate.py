"""What every request of a peer passes before anything is read from it, in this order:
federation on, a POST, its size (`FEDERATION_MAX_BODY`: 413), its signature
(401), its peer's rate (`FEDERATION_PEER_RATE`: 429), a JSON object (400).

A refused request changes nothing: nothing else of it is looked at.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse

from ..conf import get_settings
from ..transport.ratelimit import TokenBucket
from .config import federation
from .signing import BadSignature, verify

PeerView = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class Refusal(Exception):
    """A peer's request that is well signed but asks for what cannot be (a 400 with why)."""


def answer(status: int, body: dict[str, Any], **headers: str) -> HttpResponse:
    response = HttpResponse(orjson.dumps(body), status=status, content_type="application/json")
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def refused(status: int, code: str, message: str, **headers: str) -> HttpResponse:
    return answer(status, {"error": {"code": code, "message": message}}, **headers)


# Per peer, this process's bucket of its requests, made again when the settings change.
_buckets: tuple[Any, dict[str, TokenBucket]] | None = None


def bucket(peer: str) -> TokenBucket:
    global _buckets
    conf = get_settings()
    if _buckets is None or _buckets[0] is not conf:
        _buckets = (conf, {})
    buckets = _buckets[1]
    if peer not in buckets:
        rate = conf.FEDERATION_PEER_RATE
        buckets[peer] = TokenBucket(rate, max(1, math.ceil(2 * rate)))
    return buckets[peer]


async def admit(request: HttpRequest, view: PeerView) -> HttpResponse:
    """`view(peer, payload)` for a request that passes the gate, its answer as JSON; else the refusal."""
    found = federation()
    if found is None:
        return refused(404, "not_found", "federation is off")
    if request.method != "POST":
        return refused(405, "method_not_allowed", "POST", Allow="POST")
    limit = get_settings().FEDERATION_MAX_BODY
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        return refused(413, "too_large", f"the body is over FEDERATION_MAX_BODY ({limit} bytes)")
    try:
        body = request.body
    except RequestDataTooBig:
        return refused(413, "too_large", "the body is over the server's DATA_UPLOAD_MAX_MEMORY_SIZE")
    if len(body) > limit:
        return refused(413, "too_large", f"the body is over FEDERATION_MAX_BODY ({limit} bytes)")
    try:
        peer = verify(request.headers, body, found.node, lambda name: _secret(found.peers, name))
    except BadSignature as exc:
        return refused(401, "unauthenticated", str(exc))
    wait = bucket(peer).take()
    if wait:
        return refused(429, "rate_limited", "too many requests", Retry_After=str(max(1, math.ceil(wait))))
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return refused(400, "bad_request", "the body is not JSON")
    if not isinstance(payload, dict):
        return refused(400, "bad_request", "the body must be a JSON object")
    try:
        return answer(200, await view(peer, payload))
    except Refusal as exc:
        return refused(400, "bad_request", str(exc))


def _secret(peers: Any, name: str) -> bytes | None:
    peer = peers.get(name)
    return None if peer is None else peer.secret
