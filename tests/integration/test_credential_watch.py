"""The credential check of a process's sockets (messaging/transport/signins.py, watch.py):
one task per event loop, one round of reads per interval for all its
sockets, however many sockets and credentials; what ended is closed with 4401.

Sockets go through the deployed stack (`project.asgi`) with the cookie of a
real login or an API token, as browsers' tabs and bots do. Each round of the
watch is counted by wrapping `ended` where the watch calls it; the reads of
one round are counted by Django's query log.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from importlib import import_module

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.db import DatabaseError, connection
from django.test import Client as HttpClient
from django.utils import timezone

from messaging.models import ApiToken
from messaging.transport import signins
from messaging.transport.sessions import Verified
from messaging.transport.signins import Credential, ended
from messaging.transport.stamps import Stamps, rows_decide
from messaging.transport.tokens import create_token
from project.asgi import application

from ..support.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]

INTERVAL = 0.2
CLOSED_4401 = {"type": "websocket.close", "code": 4401}


@pytest.fixture(autouse=True)
def _short_interval(settings):
    settings.MESSAGING = {**settings.MESSAGING, "SESSION_CHECK_INTERVAL": INTERVAL}


def log_in_now(user) -> str:
    http = HttpClient()
    http.force_login(user)
    return http.cookies[django_settings.SESSION_COOKIE_NAME].value


log_in = database_sync_to_async(log_in_now)


@database_sync_to_async
def log_out(session_key: str) -> None:
    """What logging out in another tab does to the session."""
    import_module(django_settings.SESSION_ENGINE).SessionStore(session_key).delete()


@pytest.fixture
async def sockets():
    """`sockets(n, session=..., token=..., app=...)`: n connected sockets signed in by one credential."""
    opened: list[WebsocketCommunicator] = []

    async def open_sockets(
        n: int, *, session: str | None = None, token: str | None = None, app=application
    ) -> list[WebsocketCommunicator]:
        headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
        if session is not None:
            headers.append((b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={session}".encode()))
        if token is not None:
            headers.append((b"authorization", f"Bearer {token}".encode()))
        tabs = []
        for _ in range(n):
            tab = WebsocketCommunicator(app, "/ws/", headers=headers)
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
def rounds(monkeypatch):
    """Every round of the watch, as (the credentials asked about, thread name); set `failing` to make them raise."""

    class Rounds(list):
        failing = False

    seen = Rounds()
    check = signins.ended

    def counted(credentials, verified=None, stamps=None):
        seen.append((set(credentials), threading.current_thread().name))
        if seen.failing:
            raise DatabaseError("the database is down")
        return check(credentials, verified, stamps)

    monkeypatch.setattr(signins, "ended", counted)
    return seen


def watch_tasks() -> list[asyncio.Task]:
    return [t for t in asyncio.all_tasks() if not t.done() and t.get_coro().__qualname__.startswith("CredentialWatch.")]


async def joins(tab: WebsocketCommunicator, id: str = "j1") -> bool:
    """The socket still runs commands."""
    await tab.send_json_to({"id": id, "t": "room.join", "d": {"room": "lobby"}})
    return (await tab.receive_json_from(timeout=10))["ok"]


async def test_logout_closes_every_socket_of_the_session_and_no_other(make_user, sockets, rounds):
    user = await make_user()
    here, there = await log_in(user), await log_in(user)
    tabs = await sockets(3, session=here)
    (elsewhere,) = await sockets(1, session=there)
    assert await joins(tabs[0])

    await log_out(here)
    # Within one interval plus a check; the timeout only bounds the wait.
    for tab in tabs:
        assert await tab.receive_output(timeout=10) == CLOSED_4401
    # The user's other session is asked about again after the logout, and stays.
    asked = len(rounds)
    await wait_for(lambda: len(rounds) >= asked + 2, what="two more rounds")
    assert all(Credential(user.pk, session_key=here) not in credentials for credentials, _ in rounds[asked + 1 :])
    assert await elsewhere.receive_nothing(timeout=0.1)
    assert await joins(elsewhere)


async def test_one_task_and_one_round_of_reads_per_interval_for_every_socket(make_user, sockets, rounds):
    users = [await make_user() for _ in range(4)]
    for user in users[:3]:
        await sockets(4, session=await log_in(user))
    _, token = await database_sync_to_async(create_token)(users[3])
    await sockets(4, token=token)
    # 16 sockets, 4 credentials: one task on the loop, not one per socket or session.
    assert len(watch_tasks()) == 1
    await wait_for(lambda: len(rounds) >= 1, what="a round")
    before, started = len(rounds), time.monotonic()
    await asyncio.sleep(5 * INTERVAL)
    done, elapsed = len(rounds) - before, time.monotonic() - started
    assert 1 <= done <= elapsed / (0.75 * INTERVAL) + 2
    # Each round asks about every credential once.
    assert [{c.user_id for c in credentials} for credentials, _ in rounds[before:]] == [{u.pk for u in users}] * done


async def test_the_reads_run_on_the_command_threads(make_user, sockets, rounds, settings):
    # Not on channels' one database thread, which signs in every new socket.
    assert settings.MESSAGING["DB_THREADS"] > 0
    await sockets(2, session=await log_in(await make_user()))
    await wait_for(lambda: len(rounds) >= 2, what="two rounds")
    assert {name.split("_")[0] for _, name in rounds} == {"messaging-db"}


async def test_a_storage_error_during_the_check_keeps_the_sockets(make_user, sockets, rounds):
    user = await make_user()
    key = await log_in(user)
    _, token = await database_sync_to_async(create_token)(user)
    rounds.failing = True
    tabs = [*await sockets(2, session=key), *await sockets(1, token=token)]
    await wait_for(lambda: len(rounds) >= 3, what="three failed rounds")
    for n, tab in enumerate(tabs):
        assert await tab.receive_nothing(timeout=0.1)
        assert await joins(tab, id=f"j{n}")
    # The watch kept going: once the database answers again, what ended is noticed.
    rounds.failing = False
    await log_out(key)
    await database_sync_to_async(ApiToken.objects.filter(user=user).update)(revoked_at=timezone.now())
    for tab in tabs:
        assert await tab.receive_output(timeout=10) == CLOSED_4401


async def test_the_watch_holds_only_open_sockets_and_ends_with_the_last(make_user, sockets, rounds):
    key = await log_in(await make_user())
    tabs = await sockets(3, session=key)
    [task] = watch_tasks()
    watch = signins.credential_watch()
    assert len(watch) == 3
    for tab in tabs[:2]:
        await tab.disconnect()
    assert len(watch) == 1
    seen = len(rounds)
    await wait_for(lambda: len(rounds) >= seen + 2, what="rounds for the socket left")

    await tabs[2].disconnect()
    assert len(watch) == 0
    await wait_for(task.done, what="the watch's task to end")
    seen = len(rounds)
    await asyncio.sleep(3 * INTERVAL)
    assert len(rounds) == seen, "the watch still reads with no socket left"
    # The next socket starts it again.
    await sockets(1, session=key)
    await wait_for(lambda: len(rounds) > seen, what="a round for the new socket")


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
    tabs = await sockets(3, session=key, app=gone_at_first_close(application))
    await log_out(key)
    # One socket's client is gone; the two others are closed all the same.
    await wait_for(lambda: sum(not tab.output_queue.empty() for tab in tabs) >= 2, what="two closes")
    closed = [await tab.receive_output() for tab in tabs if not tab.output_queue.empty()]
    assert closed == [CLOSED_4401, CLOSED_4401]


# The decision and its reads, called as a round calls it.


def many_credentials(django_user_model, count: int) -> tuple[list, list[Credential]]:
    """`count` users, half signed in by a session and half by a token, and their credentials."""
    users = [django_user_model.objects.create_user(username=f"many{n}") for n in range(count)]
    credentials = [
        Credential(u.pk, session_key=log_in_now(u)) if n % 2 else Credential(u.pk, token_id=create_token(u)[0].pk)
        for n, u in enumerate(users)
    ]
    return users, credentials


def test_a_round_is_three_queries_however_many_credentials(django_user_model, django_assert_num_queries):
    _, credentials = many_credentials(django_user_model, 60)
    with django_assert_num_queries(3) as captured:
        assert ended(credentials) == set()
    assert [q["sql"].split(" FROM ")[1].split()[0] for q in captured.captured_queries] == [
        '"auth_user"',
        '"messaging_apitoken"',
        '"django_session"',
    ]


@pytest.mark.parametrize("watched", [False, True])
def test_each_way_a_credential_ends_ends_it_and_nothing_else(django_user_model, watched):
    # `watched`: as a watch's round after one that found every credential signing in, its rows stamped.
    users, credentials = many_credentials(django_user_model, 12)
    verified, stamps = (Verified(), Stamps()) if watched else (None, None)
    if watched:
        assert ended(credentials, verified, stamps) == set() and len(stamps.last) == 12
    by_token = [c for c in credentials if c.token_id is not None]
    by_session = [c for c in credentials if c.session_key is not None]
    now = timezone.now()
    ApiToken.objects.filter(pk=by_token[0].token_id).update(revoked_at=now)
    ApiToken.objects.filter(pk=by_token[1].token_id).update(expires_at=now - timedelta(seconds=1))
    ApiToken.objects.filter(pk=by_token[2].token_id).delete()
    ApiToken.objects.filter(pk=by_token[3].token_id).update(expires_at=now + timedelta(hours=1))
    import_module(django_settings.SESSION_ENGINE).SessionStore(by_session[0].session_key).delete()
    changed = users[credentials.index(by_session[1])]
    changed.set_password("new")
    changed.save()
    inactive = [users[credentials.index(by_token[4])], users[credentials.index(by_session[2])]]
    django_user_model.objects.filter(pk__in=[u.pk for u in inactive]).update(is_active=False)
    users[credentials.index(by_session[3])].delete()
    # Another user's token or session is no credential of this one.
    stolen = [
        Credential(by_session[4].user_id, token_id=by_token[5].token_id),
        Credential(by_token[5].user_id, session_key=by_session[4].session_key),
    ]
    # A socket signed in by neither (a host's own middleware) ends with its user.
    alone = [Credential(users[0].pk), Credential(inactive[0].pk)]

    assert ended([*credentials, *stolen, *alone], verified, stamps) == {
        *by_token[:3],
        by_token[4],
        *by_session[:4],
        *stolen,
        alone[1],
    }


def test_a_watch_reads_again_only_the_credentials_whose_rows_changed(django_user_model, django_assert_num_queries):
    assert rows_decide(), "the suite's settings (PostgreSQL, database sessions, ModelBackend) keep stamps"
    users, credentials = many_credentials(django_user_model, 12)
    verified, stamps = Verified(), Stamps()
    # The first round: the rows' versions, read before the rows, then the rows.
    with django_assert_num_queries(6) as captured:
        assert ended(credentials, verified, stamps) == set()
    assert ["xmin" in q["sql"] for q in captured.captured_queries] == [True] * 3 + [False] * 3
    # Nothing changed: a query per table asks which rows are no longer those versions, and none is read.
    with django_assert_num_queries(3) as captured:
        assert ended(credentials, verified, stamps) == set()
    assert all("unnest" in q["sql"] for q in captured.captured_queries)
    # A change that ends nothing (a login's `last_login`) is read again, and still signs in.
    users[1].last_login = timezone.now()
    users[1].save(update_fields=["last_login"])
    assert ended(credentials, verified, stamps) == set() and len(stamps.last) == 12
    # A token that expires ends at its expiry with no change of its row: the stamp knows it.
    token = next(c for c in credentials if c.token_id is not None)
    ApiToken.objects.filter(pk=token.token_id).update(expires_at=timezone.now() + timedelta(seconds=1))
    assert ended(credentials, verified, stamps) == set()
    time.sleep(1.1)
    assert ended(credentials, verified, stamps) == {token}
    # A round forgets what it was not asked about.
    assert token == credentials[0]
    assert ended(credentials[1:4], verified, stamps) == set() and set(stamps.last) == set(credentials[1:4])


def test_a_rounds_statements_are_kept_by_psycopg_without_their_credentials_and_never_prepared(django_user_model):
    # psycopg keeps the text of each connection's recent statements, to count
    # their runs. Bound on the client, a probe's text held every key and
    # version it sends: a copy per database thread, for as long as the process ran.
    _, credentials = many_credentials(django_user_model, 100)
    verified, stamps = Verified(), Stamps()
    # Read and stamped, then probed: past the project's `prepare_threshold` (5) in quiet rounds.
    for _ in range(8):
        assert ended(credentials, verified, stamps) == set()
    assert not connection.queries_logged, "bound on the server only where queries are not logged"
    kept = connection.connection._prepared
    counted = [query for query, _types in kept._counts if b"xmin" in query]
    assert len(counted) == 6, "the rounds' statements ran on this connection: three probes, three reads of versions"
    assert max(map(len, counted)) < 500, "and their texts hold no credential"
    # A generic plan cannot see how many keys a probe holds (it looked them up one by one).
    assert not [query for query, _types in kept._names if b"xmin" in query], "never prepared"


def test_a_quiet_round_sends_the_last_rounds_probe_and_still_sees_every_change(
    django_user_model, django_assert_num_queries, monkeypatch
):
    from messaging.transport import stamps as stamps_module

    users, listed = many_credentials(django_user_model, 12)
    credentials = set(listed)
    verified, stamps = Verified(), Stamps()
    built = []
    array = stamps_module.array
    monkeypatch.setattr(stamps_module, "array", lambda values: built.append(1) or array(values))
    assert ended(credentials, verified, stamps) == set()  # read and stamped
    assert ended(credentials, verified, stamps) == set()  # unchanged: the probe built once more
    kept = stamps.last
    built.clear()
    with django_assert_num_queries(3) as captured:
        assert ended(credentials, verified, stamps) == set()
    assert built == [], "a quiet round builds no probe: it sends the last one"
    assert all("unnest" in q["sql"] for q in captured.captured_queries)
    assert stamps.last is kept, "and keeps the last round's stamps as they are"

    # A change behind a quiet round is seen, and decided in full.
    token = next(c for c in listed if c.token_id is not None)
    session = next(c for c in listed if c.session_key is not None)
    ApiToken.objects.filter(pk=token.token_id).update(revoked_at=timezone.now())
    import_module(django_settings.SESSION_ENGINE).SessionStore(session.session_key).delete()
    assert ended(credentials, verified, stamps) == {token, session}
    assert token not in stamps.last and len(stamps.last) == 10
    assert stamps.probed is None and stamps.probe[0] == ("", ""), "a probe of stamps no round starts from is let go"
    # The sockets of the ended credentials close; the round after is quiet again.
    credentials -= {token, session}
    assert ended(credentials, verified, stamps) == set()
    built.clear()
    assert ended(credentials, verified, stamps) == set()
    assert built == []

    # An expiry that comes with no change of a row ends a quiet round's credential.
    expiring = next(c for c in credentials if c.token_id is not None)
    ApiToken.objects.filter(pk=expiring.token_id).update(expires_at=timezone.now() + timedelta(seconds=1))
    assert ended(credentials, verified, stamps) == set()  # read again: its row changed
    assert ended(credentials, verified, stamps) == set()  # the probe kept, with its expiry
    time.sleep(1.1)
    assert ended(credentials, verified, stamps) == {expiring}
    credentials.discard(expiring)

    # A new socket's credential is read in full beside the stamped ones; one gone is forgotten.
    newcomer = django_user_model.objects.create_user(username="newcomer")
    joined = Credential(newcomer.pk, session_key=log_in_now(newcomer))
    assert ended(credentials | {joined}, verified, stamps) == set()
    assert joined in stamps.last
    left = next(iter(credentials))
    assert ended(credentials - {left}, verified, stamps) == set()
    assert left not in stamps.last and joined not in stamps.last
    newcomer.set_password("new")
    newcomer.save()
    assert ended(credentials | {joined}, verified, stamps) == {joined}


async def test_the_watch_asks_about_each_credential_of_its_sockets_once_while_one_is_open():
    from messaging.transport.watch import CredentialWatch

    asked: list[set] = []

    async def check(credentials):
        asked.append(credentials)
        return set()

    async def close():
        pass

    watch = CredentialWatch(check, 60)
    for socket, credential in enumerate(["a", "a", "b", "c"]):
        watch.add(socket, credential, close)
    watch.add(3, "b", close)  # added again with another credential: counted once, as the last
    watch.discard(0)
    watch.discard(2)
    watch.discard(7)  # never added
    await watch.check_once()
    assert asked == [{"a", "b"}]
    watch.discard(1)
    watch.discard(3)
    await watch.check_once()
    assert asked == [{"a", "b"}] and watch.credentials == {} and len(watch) == 0
    watch.stop()


@pytest.mark.parametrize(
    "engine", ["django.contrib.sessions.backends.cached_db", "django.contrib.sessions.backends.cache"]
)
def test_another_session_engine_gets_the_same_decision(django_user_model, settings, engine):
    settings.SESSION_ENGINE = engine
    users = [django_user_model.objects.create_user(username=f"e{n}") for n in range(3)]
    credentials = [Credential(u.pk, session_key=log_in_now(u)) for u in users]
    import_module(engine).SessionStore(credentials[0].session_key).delete()
    users[1].set_password("new")
    users[1].save()
    assert ended(credentials) == set(credentials[:2])


def test_a_session_signed_under_a_fallback_secret_still_signs_in(django_user_model, settings):
    user = django_user_model.objects.create_user(username="rotated")
    credential = Credential(user.pk, session_key=log_in_now(user))
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a-new-secret"
    assert ended([credential]) == set()
    # And the check wrote nothing: the key was not cycled, nor the session deleted.
    assert import_module(django_settings.SESSION_ENGINE).SessionStore().exists(credential.session_key)


def test_a_round_of_more_credentials_than_a_chunk_reads_in_chunks(
    django_user_model, django_assert_num_queries, monkeypatch
):
    monkeypatch.setattr(signins, "CHUNK", 4)
    _, credentials = many_credentials(django_user_model, 10)
    with django_assert_num_queries(3 * 3):
        assert ended(credentials) == set()


def test_a_watch_decodes_a_session_again_only_once_something_of_it_changed(django_user_model, monkeypatch):
    from django.contrib.sessions.backends.base import SessionBase

    decoded = 0
    seen: list[str] = []
    decode = SessionBase.decode

    def counting_decode(self, session_data):
        nonlocal decoded
        decoded += 1
        seen.append(session_data)
        return decode(self, session_data)

    monkeypatch.setattr(SessionBase, "decode", counting_decode)
    users = [django_user_model.objects.create_user(username=f"v{n}") for n in range(8)]
    credentials = [Credential(u.pk, session_key=log_in_now(u)) for u in users]
    verified = Verified()
    decoded = 0  # the logins' own
    assert ended(credentials, verified) == set()
    assert (decoded, len(verified.last)) == (8, 8)
    decoded = 0
    assert ended(credentials, verified) == set()
    assert decoded == 0, "a session unchanged since the last round is not decoded again"

    # Each way a session stops signing in, behind a session the last round verified.
    store = import_module(django_settings.SESSION_ENGINE).SessionStore
    store(credentials[0].session_key).delete()
    users[1].set_password("new")
    users[1].save()
    django_user_model.objects.filter(pk=users[2].pk).update(is_active=False)
    users[3].delete()
    Session = store.get_model_class()
    Session.objects.filter(session_key=credentials[4].session_key).update(expire_date=timezone.now())
    # Its data rewritten to sign another user in: decided again, and refused.
    other = store(credentials[5].session_key)
    other["_auth_user_id"] = str(users[6].pk)
    other.save()
    seen.clear()
    assert ended(credentials, verified) == set(credentials[:6])
    unchanged = Session.objects.filter(session_key__in=[c.session_key for c in credentials[6:]])
    assert not {s.session_data for s in unchanged} & set(seen), "the unchanged sessions are not decoded again"
    assert len(verified.last) == 2

    # What a round was not asked about, it forgets.
    assert ended(credentials[7:], verified) == set()
    assert len(verified.last) == 1


def test_a_watch_decides_again_under_new_secret_keys(django_user_model, settings):

    user = django_user_model.objects.create_user(username="rekeyed")
    credential = Credential(user.pk, session_key=log_in_now(user))
    verified = Verified()
    assert ended([credential], verified) == set()
    settings.SECRET_KEY = "a-new-secret-and-no-fallback"
    assert ended([credential], verified) == {credential}


def test_two_sockets_of_a_user_stamped_at_two_versions_of_the_user_are_each_checked_against_their_own(
    django_user_model,
):
    # The old session's socket was last decided before a password change, the new one's after it
    # (a round may stamp them so: one found unchanged, the other read just after the change).
    from messaging.transport.stamps import Stamp, session_model, versions

    user = django_user_model.objects.create_user(username="two-devices", password="old")
    old = Credential(user.pk, session_key=log_in_now(user))
    before = versions(django_user_model, [str(user.pk)])[str(user.pk)][0]
    user.set_password("new")
    user.save()
    new = Credential(user.pk, session_key=log_in_now(user))
    after = versions(django_user_model, [str(user.pk)])[str(user.pk)][0]
    sessions = versions(session_model(), [old.session_key, new.session_key], "expire_date")
    stamps, verified = Stamps(), Verified()
    assert stamps.start()
    stamps.last = {
        old: Stamp(before, *sessions[old.session_key]),
        new: Stamp(after, *sessions[new.session_key]),
    }
    assert before != after
    assert ended([old, new], verified, stamps) == {old}


def test_the_stamps_array_literal_carries_any_text_as_it_is():
    from django.db import connection

    from messaging.transport.stamps import array

    values = ["plain", "a,b", 'say "hi"', "back\\slash", "{braces}", " spaced ", "NULL", ""]
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::text[]", [array(values)])
        assert cursor.fetchone()[0] == values
