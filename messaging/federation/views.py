"""The paths under `/federation/` (docs/FEDERATION.md, "What crosses the link"), each behind the gate (gate.py).

- `POST /federation/commands`: a peer's user's commands on rooms of this deployment (carried.py)
- `POST /federation/changes`: a home's changes of rooms this deployment replicates (applying.py)
- `POST /federation/fetch`: a page of a room of this deployment after a rev (catchup.py)
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt

from ..core.runtime import runtime
from .applying import take
from .carried import run_carried
from .catchup import behind, page
from .gate import admit


async def _changes(peer: str, payload: dict[str, Any]) -> dict[str, Any]:
    taken, frames = await runtime().gateway.run(take, peer, payload)
    frames.publish()
    for room in taken:
        if room.behind:
            behind(peer, room.room)
    return {"rooms": [{"room": t.room, "position": t.position, "rev": t.rev} for t in taken]}


async def _fetch(peer: str, payload: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = await runtime().gateway.run(page, peer, payload)
    return answer


@csrf_exempt  # signed by the peer instead (signing.py)
@never_cache
async def commands(request: HttpRequest) -> HttpResponse:
    return await admit(request, run_carried)


@csrf_exempt
@never_cache
async def changes(request: HttpRequest) -> HttpResponse:
    return await admit(request, _changes)


@csrf_exempt
@never_cache
async def fetch(request: HttpRequest) -> HttpResponse:
    return await admit(request, _fetch)
