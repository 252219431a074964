"""`CredentialWatch` (messaging/transport/watch.py) on its own: no Django, no Channels, only
the question it is given and the sockets' close callbacks."""

from __future__ import annotations

import asyncio

from messaging.transport.watch import CredentialWatch

from .test_layers import PACKAGE, imports

INTERVAL = 0.05


class Sockets:
    """Sockets that note their close; the question asked each round, and its answer."""

    def __init__(self) -> None:
        self.closed: list[str] = []
        self.asked: list[set[str]] = []
        self.ended: set[str] = set()
        self.failing = False

    async def check(self, credentials: set[str]) -> set[str]:
        self.asked.append(set(credentials))
        if self.failing:
            raise OSError("the database is down")
        return self.ended & credentials

    def closer(self, name: str, fails: bool = False):
        async def close() -> None:
            self.closed.append(name)
            if fails:
                raise OSError("the client is gone")

        return close


async def rounds(sockets: Sockets, count: int) -> None:
    asked = len(sockets.asked)
    while len(sockets.asked) < asked + count:
        await asyncio.sleep(INTERVAL / 5)


def test_it_imports_no_framework():
    assert not {
        i
        for i in imports(PACKAGE / "transport" / "watch.py")
        if i.split(".")[0] in ("django", "channels", "daphne", "messaging")
    }


async def test_one_question_per_round_for_every_socket_and_only_the_ended_are_closed():
    sockets = Sockets()
    watch = CredentialWatch(sockets.check, INTERVAL)
    for n in range(100):
        watch.add(f"socket{n}", f"credential{n % 3}", sockets.closer(f"socket{n}", fails=n == 0))
    await rounds(sockets, 2)
    assert all(asked == {"credential0", "credential1", "credential2"} for asked in sockets.asked)
    assert sockets.closed == []

    sockets.ended = {"credential0"}
    await rounds(sockets, 2)
    # Every socket of it, once, the one whose close failed too; no other.
    assert sorted(sockets.closed) == sorted(f"socket{n}" for n in range(0, 100, 3))
    assert len(watch) == 66 and sockets.asked[-1] == {"credential1", "credential2"}
    watch.stop()


async def test_a_failed_question_closes_nothing_and_is_asked_again():
    sockets = Sockets()
    watch = CredentialWatch(sockets.check, INTERVAL)
    watch.add("a", "credential", sockets.closer("a"))
    sockets.failing, sockets.ended = True, {"credential"}
    await rounds(sockets, 3)
    assert sockets.closed == [] and len(watch) == 1
    sockets.failing = False
    await rounds(sockets, 1)
    assert sockets.closed == ["a"] and len(watch) == 0
    watch.stop()


async def test_its_task_ends_with_the_last_socket_and_starts_with_the_next():
    sockets = Sockets()
    watch = CredentialWatch(sockets.check, INTERVAL)
    watch.add("a", "credential", sockets.closer("a"))
    first = watch.task
    await rounds(sockets, 1)
    watch.discard("a")
    watch.discard("never added")
    await asyncio.wait_for(first, 10 * INTERVAL)
    asked = len(sockets.asked)
    await asyncio.sleep(3 * INTERVAL)
    assert len(sockets.asked) == asked
    watch.add("b", "credential", sockets.closer("b"))
    assert watch.task is not first
    await rounds(sockets, 1)
    watch.stop()
    await asyncio.sleep(0)
    assert watch.task.cancelled() or watch.task.done()
