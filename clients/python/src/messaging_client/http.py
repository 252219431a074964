"""Commands over HTTP (`POST /api/commands`) with an API token, for scripts that keep no socket.

    from messaging_client import http_command

    status, ack = http_command("http://127.0.0.1:8000", "room.post", {"room": "lobby", "body": "hi"},
                               id="deploy-42", token=token)

The id is the command's `Idempotency-Key`: the request is retried with it,
unchanged, after a connection failure, a timeout, `409`, `429` or `503`
(waiting `Retry-After`, else backing off with full jitter), so it takes
effect once. A redirect is never followed (the token would go with it, and
urllib would turn the POST into a GET that runs nothing): it raises `Redirected`. The standard library only.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from .ids import time_ordered_id
from .outbox import LANES
from .redirects import Redirected, not_following

RETRIED = frozenset({409, 429, 502, 503, 504})


def http_command(
    base_url: str,
    t: str,
    d: Any,
    *,
    id: str | None = None,
    token: str | None = None,
    retries: int = 5,
    timeout: float = 10.0,
    backoff_base: float = 0.5,
    backoff_cap: float = 10.0,
    rand: Callable[[], float] = random.random,
) -> tuple[int, dict[str, Any]]:
    """POST one command; its final status and body (the ack, or an error frame).

    Raises `Redirected` if the server answers with a redirect: nothing is sent
    to where it points, and whatever it would answer is not taken for the ack.
    """
    key = id or time_ordered_id()
    headers = {"Content-Type": "application/json", "Idempotency-Key": key}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = json.dumps({"t": t, "d": d}).encode()
    attempt = 0
    while True:
        wait: float | None = None
        try:
            request = urllib.request.Request(base_url.rstrip("/") + "/api/commands", body, headers, method="POST")
            with not_following.open(request, timeout=timeout) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                raise Redirected(exc.code, exc.headers.get("Location")) from None
            answer = exc.read()
            if exc.code not in RETRIED or attempt >= retries:
                return exc.code, json.loads(answer) if answer else {}
            retry_after = exc.headers.get("Retry-After")
            wait = float(retry_after) if retry_after and retry_after.isdigit() else None
        except (OSError, TimeoutError):
            # Sent or not, the same key again is safe: the server applies it once.
            if attempt >= retries:
                raise
        attempt += 1
        time.sleep(wait if wait is not None else rand() * min(backoff_cap, backoff_base * 2**attempt))


async def ahttp_command(base_url: str, t: str, d: Any, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    """`http_command` from async code, on a thread."""
    return await asyncio.to_thread(http_command, base_url, t, d, **kwargs)


def served_lanes(base_url: str, *, timeout: float = 5.0) -> Mapping[str, str]:
    """The lanes of the server's command types (`x-messaging-lanes` of `GET /api/openapi.json`), for
    `Client(lanes=...)`: a host's own types included. The built-in types' (`LANES`) when it cannot be read."""
    try:
        request = urllib.request.Request(base_url.rstrip("/") + "/api/openapi.json")
        with not_following.open(request, timeout=timeout) as response:
            lanes = json.loads(response.read()).get("x-messaging-lanes")
    except (OSError, ValueError, AttributeError, Redirected):
        return LANES
    if not isinstance(lanes, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in lanes.items()):
        return LANES
    return lanes
