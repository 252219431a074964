"""The ping wheel of servers/uvicorn_pings.py on a real event loop: each connection pinged once per
schedule, never before it is due, not at all once cancelled, and one failing ping stopping no other."""

from __future__ import annotations

import asyncio

from messaging.transport.servers.uvicorn_pings import SLOT_SECONDS, PingWheel


class Connection:
    """What the wheel asks of uvicorn's protocol: its ping."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fails: bool = False) -> None:
        self.loop = loop
        self.fails = fails
        self.pinged_at: list[float] = []

    def send_keepalive_ping(self) -> None:
        self.pinged_at.append(self.loop.time())
        if self.fails:
            raise RuntimeError("a broken connection")


def test_each_connection_is_pinged_once_when_due_never_before_and_not_once_cancelled():
    async def scenario():
        loop = asyncio.get_running_loop()
        wheel = PingWheel()
        early = [Connection(loop), Connection(loop)]
        late, cancelled, failing = Connection(loop), Connection(loop), Connection(loop, fails=True)
        asked = loop.time()
        entries = {id(c): wheel.schedule(loop, c, 0.2) for c in [*early, cancelled, failing]}
        wheel.schedule(loop, late, 1.3)
        entries[id(cancelled)].cancel()
        await asyncio.sleep(1.3 + SLOT_SECONDS + 0.3)
        return asked, early, late, cancelled, failing, wheel

    asked, early, late, cancelled, failing, wheel = asyncio.run(scenario())
    for connection in (*early, failing):
        [at] = connection.pinged_at
        assert asked + 0.2 <= at <= asked + 0.2 + SLOT_SECONDS + 0.2
    # All of a slot by one timer: the whole second it was due in.
    assert len({int(c.pinged_at[0] / SLOT_SECONDS) for c in (*early, failing)}) == 1
    [at] = late.pinged_at
    assert at >= asked + 1.3
    assert cancelled.pinged_at == []
    assert wheel.slots == {}, "a rung slot is gone"
