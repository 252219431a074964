"""The shared session check (`SessionWatch`): one periodic read per session
and process, however many sockets the session signed in.

Sockets go through the deployed middleware stack with the cookie of a real
login, as a browser's tabs do. Each session read of the watches is counted
by wrapping `session_still_signs_in` where the consumer calls it.
"""
from __future__ import annotations

import asyncio
import threading
import time
from importlib import import_module

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.db import DatabaseError
from django.test import Client as HttpClient

from messaging.transport import sessions
from project.asgi import application

from ..support.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]

INTERVAL = 0.2
CLOSED_4401 = {"type": "websocket.close", "code": 4401}


@pytest.fixture(autouse=True)
def _short_interval(settings):
    settings.MESSAGING = {**settings.MESSAGING, "SESSION_CHECK_INTERVAL": INTERVAL}


@database_sync_to_async
def log_in(user) -> str:
    http = HttpClient()
    http.force_login(user)
    return http.cookies[django_settings.SESSION_COOKIE_NAME].value


@database_sync_to_async
def log_out(session_key: str) -> None:
    """What logging out in another tab does to the session."""
    import_module(django_settings.SESSION_ENGINE).SessionStore(session_key).delete()


@pytest.fixture
async def sockets():
    """`sockets(session_key, n, app=...)`: n connected sockets of one session (a browser's tabs)."""
    opened: list[WebsocketCommunicator] = []

    async def open_sockets(session_key: str, n: int, app=application) -> list[WebsocketCommunicator]:
        cookie = f"{django_settings.SESSION_COOKIE_NAME}={session_key}".encode()
        tabs = []
        for _ in range(n):
            tab = WebsocketCommunicator(app, "/ws/", headers=[(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", cookie)])
            opened.append(tab)
            assert (await tab.connect(timeout=10))[0]
            tabs.append(tab)
        return tabs

    yield open_sockets
    for tab in opened:
        try:
            await tab.disconnect()
        except Exception:
            pass


@pytest.fixture
def reads(monkeypatch):
    """Every session read of the watches, as (session key, thread name); set `failing` to make them raise."""

    class Reads(list):
        failing = False

    seen = Reads()
    read = sessions.session_still_signs_in

    def counted(session_key, user):
        seen.append((session_key, threading.current_thread().name))
        if seen.failing:
            raise DatabaseError("the session store is down")
        return read(session_key, user)

    monkeypatch.setattr(sessions, "session_still_signs_in", counted)
    return seen


def watch_tasks() -> list[asyncio.Task]:
    return [t for t in asyncio.all_tasks() if not t.done() and t.get_coro().__qualname__.startswith("SessionWatch.")]


async def joins(tab: WebsocketCommunicator, id: str = "j1") -> bool:
    """The socket still runs commands."""
    await tab.send_json_to({"id": id, "t": "room.join", "d": {"room": "lobby"}})
    return (await tab.receive_json_from(timeout=10))["ok"]


async def test_logout_closes_every_socket_of_the_session_and_no_other(make_user, sockets, reads):
    user = await make_user()
    here, there = await log_in(user), await log_in(user)
    tabs = await sockets(here, 3)
    (elsewhere,) = await sockets(there, 1)
    assert await joins(tabs[0])

    await log_out(here)
    # Within one interval plus a check; the timeout only bounds the wait.
    for tab in tabs:
        assert await tab.receive_output(timeout=10) == CLOSED_4401
    # The user's other session is read again after the logout, and stays.
    checked = sum(key == there for key, _ in reads)
    await wait_for(lambda: sum(key == there for key, _ in reads) >= checked + 2, what="two more checks of the other session")
    assert await elsewhere.receive_nothing(timeout=0.1)
    assert await joins(elsewhere)


async def test_the_sockets_of_a_session_share_one_read_per_interval(make_user, sockets, reads):
    key = await log_in(await make_user())
    await sockets(key, 8)
    before, started = len(reads), time.monotonic()
    await asyncio.sleep(4 * INTERVAL)
    done, elapsed = len(reads) - before, time.monotonic() - started
    # One watch reads at most once per interval; eight would read some 32 times.
    assert 1 <= done <= elapsed / INTERVAL + 2
    assert {k for k, _ in reads} == {key}


async def test_the_session_is_read_on_the_command_threads(make_user, sockets, reads, settings):
    # Not on channels' one database thread, which signs in every new socket.
    assert settings.MESSAGING["DB_THREADS"] > 0
    await sockets(await log_in(await make_user()), 2)
    await wait_for(lambda: len(reads) >= 2, what="two reads")
    assert {name.split("_")[0] for _, name in reads} == {"messaging-db"}


async def test_a_storage_error_during_the_check_keeps_the_sockets(make_user, sockets, reads):
    key = await log_in(await make_user())
    reads.failing = True
    tabs = await sockets(key, 2)
    await wait_for(lambda: len(reads) >= 3, what="three failed checks")
    for n, tab in enumerate(tabs):
        assert await tab.receive_nothing(timeout=0.1)
        assert await joins(tab, id=f"j{n}")
    # The watch kept going: once the store answers again, a logout is noticed.
    reads.failing = False
    await log_out(key)
    for tab in tabs:
        assert await tab.receive_output(timeout=10) == CLOSED_4401


async def test_the_watch_outlives_sockets_that_leave_and_ends_with_the_last(make_user, sockets, reads):
    key = await log_in(await make_user())
    tabs = await sockets(key, 3)
    assert len(watch_tasks()) == 1
    for tab in tabs[:2]:
        await tab.disconnect()
    seen = len(reads)
    await wait_for(lambda: len(reads) >= seen + 2, what="checks for the socket left")
    assert len(watch_tasks()) == 1

    await tabs[2].disconnect()
    await wait_for(lambda: not watch_tasks(), what="the watch to end")
    await asyncio.sleep(INTERVAL)  # a read already on its thread finishes
    seen = len(reads)
    await asyncio.sleep(3 * INTERVAL)
    assert len(reads) == seen, "the session is still read with no socket left"


def gone_at_first_close(app):
    """`app` on a server whose client went away before the first close: that
    send fails, as uvicorn's does (ClientDisconnected, an OSError)."""
    failed = []

    async def serve(scope, receive, send):
        async def send_or_fail(message):
            if message["type"] == "websocket.close" and not failed:
                failed.append(message)
                raise OSError("the client is gone")
            await send(message)

        return await app(scope, receive, send_or_fail)

    return serve


async def test_a_socket_that_fails_to_close_leaves_no_other_socket_of_the_session_open(make_user, sockets):
    key = await log_in(await make_user())
    tabs = await sockets(key, 3, app=gone_at_first_close(application))
    await log_out(key)
    # One socket's client is gone; the two others are closed all the same.
    await wait_for(lambda: sum(not tab.output_queue.empty() for tab in tabs) >= 2, what="two closes")
    closed = [await tab.receive_output() for tab in tabs if not tab.output_queue.empty()]
    assert closed == [CLOSED_4401, CLOSED_4401]
