"""A reconnect storm: 500 sockets dropped at once, all reconnecting at once.

Bounded for a small CI machine: 25 users with 20 tabs each, over 50 rooms (10
sockets a room, so fan-out stays modest). The time from the drop until every
socket is back and every outbox empty is printed, not asserted: the machine
is shared, and tests never assert on timing.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async

from .conftest import sign_in_many
from .outbox import settle, verify

pytestmark = [pytest.mark.e2e]

USERS, TABS, ROOMS = 25, 20, 50


async def test_reconnect_storm_of_500_sockets_loses_nothing(cluster, outboxes):
    servers = cluster(2)
    urls = [server.url for server in servers]
    sessions = await sign_in_many(urls[0], USERS, prefix="storm")
    fleet = []
    # Opening the fleet is not the storm: a few dozen at a time.
    for start in range(0, USERS * TABS, 50):
        fleet += await asyncio.gather(
            *(outboxes(sessions[n % USERS], urls, f"room-{n % ROOMS}", first=n) for n in range(start, start + 50))
        )
    assert len(fleet) == 500

    await asyncio.gather(*(o.post("before the storm") for o in fleet))
    dropped = time.monotonic()
    for outbox in fleet:
        outbox.drop()
    await asyncio.gather(*(o.post("during the storm") for o in fleet))  # queued while offline

    deadline = dropped + 120
    while any(o.connects < 2 or o.ws is None for o in fleet) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    reconnected = time.monotonic() - dropped
    await settle(fleet, timeout=max(1, deadline - time.monotonic()))
    recovered = time.monotonic() - dropped

    report = await sync_to_async(verify)(fleet)
    print(f"storm: 500 sockets back in {reconnected:.1f}s, every outbox empty after {recovered:.1f}s; {report}")
    assert all(o.connects >= 2 for o in fleet)
    assert report["commands"] == 1000
