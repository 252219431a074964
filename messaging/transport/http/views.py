"""`POST /api/commands`, a command over HTTP, and `GET /api/openapi.json`, its description.

The request runs through `messaging.asubmit`, the socket's path, on the
server's event loop: the header `Idempotency-Key` is the command's id, the
body `{"t", "d"}` its type and data, read with the protocol's own JSON rules,
and the response body is the ack a socket would get, with the status of
PROTOCOL.md 1.1 ("Commands over HTTP"). What is not a command at all (no
credentials, no valid key, a body that is not JSON) is answered with an
error frame like the socket's `bad_frame`.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from ...conf import get_settings
from ...core.exceptions import BadFrame, CommandError
from ...core.protocol import COMMAND_ID, AckFrame, ack_error, encode, loads
from ..addresses import client_of_request
from ..submitting import ID_RULE, asubmit, new_id
from .credentials import Unauthenticated, caller, check_rate
from .openapi import document

log = logging.getLogger(__name__)

# The status of each refusal's code (PROTOCOL.md 1.1).
STATUS = {
    "invalid": 400,
    "unknown_type": 400,
    "forbidden": 403,
    "in_progress": 409,
    "id_reused": 422,
    "rate_limited": 429,
    "unavailable": 503,
}
# Retry-After, in whole seconds, where the refusal's code says to try again
# and it names no time of its own.
RETRY_AFTER = {"in_progress": 1, "unavailable": 1}


def error_response(status: int, code: str, message: str, **headers: str) -> HttpResponse:
    """What answers a request that is no command (an error frame, as the socket's `bad_frame`)."""
    response = _json(status, {"t": "error", "error": {"code": code, "message": message}})
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def _json(status: int, body: Any) -> HttpResponse:
    # The protocol's encoder: what the socket would send, byte for byte.
    return HttpResponse(encode(body), status=status, content_type="application/json")


def ack_response(ack: AckFrame) -> HttpResponse:
    if ack["ok"]:
        response = _json(200, ack)
        if ack.get("dup"):
            response["Idempotent-Replayed"] = "true"
        return response
    error = ack["error"]
    response = _json(STATUS.get(error["code"], 400), ack)
    retry_after = error.get("retry_after")
    if isinstance(retry_after, (int, float)):
        response["Retry-After"] = str(max(1, math.ceil(retry_after)))
    elif error["code"] in RETRY_AFTER:
        response["Retry-After"] = str(RETRY_AFTER[error["code"]])
    return response


@csrf_exempt  # checked in `caller` for the session alone: a token needs none
@never_cache
async def commands(request: HttpRequest) -> HttpResponse:
    """`POST /api/commands`: one command, its ack."""
    if request.method != "POST":
        response = error_response(405, "method_not_allowed", 'POST a command: {"t": ..., "d": ...}')
        response["Allow"] = "POST"
        return response
    try:
        body = request.body
    except RequestDataTooBig:
        body = None
    limit = get_settings().MAX_FRAME_BYTES
    try:
        who = await caller(request)
    except Unauthenticated as exc:
        return error_response(401, "unauthenticated", str(exc.__doc__), WWW_Authenticate='Bearer realm="messaging"')
    except CommandError as exc:  # a session without its CSRF token
        return error_response(403, exc.code, exc.message)
    key = request.headers.get("Idempotency-Key")
    if key is not None and not COMMAND_ID.fullmatch(key):
        return error_response(400, "bad_frame", f"Idempotency-Key: {ID_RULE}")
    try:
        # Every signed-in request costs, as every command on a socket does.
        await check_rate(who)
    except CommandError as exc:
        return ack_response(ack_error(key or new_id(), exc.as_error()))
    if body is None or len(body) > limit:
        return error_response(413, "too_large", f"the body is over MAX_FRAME_BYTES ({limit} bytes)")
    try:
        envelope = loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        return error_response(400, "bad_frame", "the body is not UTF-8")
    except BadFrame as exc:
        return error_response(400, "bad_frame", exc.message)
    if not isinstance(envelope, dict):
        return error_response(400, "bad_frame", 'the body must be a JSON object: {"t": ..., "d": ...}')
    try:
        ack = await asubmit(
            who.user, envelope.get("t"), envelope.get("d"), id=key, client_address=client_of_request(request)
        )
    except BadFrame as exc:
        return error_response(400, "bad_frame", f"Idempotency-Key: {exc.message}")
    return ack_response(ack)


@require_GET
async def openapi(request: HttpRequest) -> HttpResponse:
    """`GET /api/openapi.json`: the OpenAPI 3 document of this API."""
    return JsonResponse(document())
