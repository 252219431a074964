"""Requests to a peer: signed, bounded in time and size, failing only as `PeerUnavailable`.

One `httpx.AsyncClient` per event loop (its runtime's part, closed with
it), so requests to a peer share connections. Every request is a POST of a
JSON object to a path under `/federation/`, signed with the pair's secret
(signing.py); every answer but a 200 with a JSON object, within
`FEDERATION_TIMEOUT` and `FEDERATION_MAX_BODY`, is a failure: the peer
cannot be reached, or will not say.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson

from ..conf import get_settings
from ..core.runtime import runtime
from .config import federation
from .signing import signed_headers

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)


class PeerUnavailable(Exception):
    """The peer did not answer the request, or not with what it should."""


def _client() -> httpx.AsyncClient:
    # httpx is the `federation` extra's: loaded once federation is on, by its first request.
    import httpx

    return runtime().part(
        "federation client",
        # Proxies of the environment are not used: peers are named by their base URLs.
        lambda: httpx.AsyncClient(trust_env=False, follow_redirects=False),
        lambda client: client.aclose(),
    )


async def call(peer_name: str, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """POST `payload` to the peer's `path`; its answer, a JSON object, or `PeerUnavailable`."""
    import httpx

    found = federation()
    if found is None or peer_name not in found.peers:
        raise PeerUnavailable(f"no peer {peer_name!r}")
    peer = found.peers[peer_name]
    conf = get_settings()
    body = orjson.dumps(payload)
    headers = {"Content-Type": "application/json", **signed_headers(peer.secret, found.node, peer.name, body)}
    try:
        async with _client().stream(
            "POST", peer.url(path), content=body, headers=headers, timeout=conf.FEDERATION_TIMEOUT
        ) as response:
            answer = await _read(response, conf.FEDERATION_MAX_BODY)
    except httpx.HTTPError as exc:
        raise PeerUnavailable(f"{peer_name}{path}: {type(exc).__name__}: {exc}") from exc
    if response.status_code != 200:
        if response.status_code in (400, 401, 403, 404, 413):
            # Not the link's weather: the two sides disagree (secrets, versions, limits).
            log.error("peer %s answered %s to %s: %s", peer_name, response.status_code, path, answer[:200])
        raise PeerUnavailable(f"{peer_name}{path}: status {response.status_code}")
    try:
        value = orjson.loads(answer)
    except orjson.JSONDecodeError as exc:
        raise PeerUnavailable(f"{peer_name}{path}: not JSON") from exc
    if not isinstance(value, dict):
        raise PeerUnavailable(f"{peer_name}{path}: not a JSON object")
    return dict(value)


async def _read(response: httpx.Response, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    import httpx

    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise httpx.DecodingError(f"the answer is over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
