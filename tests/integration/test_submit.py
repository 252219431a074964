"""`messaging.submit` / `messaging.asubmit` and `manage.py messaging_post`: commands from a host's own code."""

from __future__ import annotations

import asyncio
import json
from io import StringIO

import pytest
from channels.db import database_sync_to_async
from django.core.management import CommandError, call_command

import messaging
from messaging.core.exceptions import BadFrame

from .conftest import rows

pytestmark = [pytest.mark.django_db(transaction=True)]


async def test_asubmit_returns_the_ack_and_reaches_sockets(make_user, open_clients):
    user = await make_user()
    socket = await open_clients(user)
    await socket.join("lobby")
    ack = await messaging.asubmit(user, "room.post", {"room": "lobby", "body": "from code"}, id="code-1")
    assert ack["t"] == "ack" and ack["ok"] and ack["dup"] is False and ack["d"]["seq"] == 1
    [msg] = await socket.frames("msg", 1)
    assert msg["d"]["id"] == "code-1"
    again = await messaging.asubmit(user, "room.post", {"room": "lobby", "body": "from code"}, id="code-1")
    assert again["dup"] and again["d"] == ack["d"]
    # The socket sending the same id is the same command.
    assert (await socket.call("room.post", {"room": "lobby", "body": "from code"}, id="code-1"))["dup"]
    assert await socket.nothing_more()
    assert len(await rows()) == 1


async def test_asubmit_refusals_are_acks(make_user):
    user = await make_user()
    ack = await messaging.asubmit(user, "room.post", {"room": "nowhere", "body": "x"}, id="r-1")
    assert ack["ok"] is False and ack["error"]["code"] == "forbidden"
    ack = await messaging.asubmit(user, "nope", {}, id="r-2")
    assert ack["error"]["code"] == "unknown_type"
    ack = await messaging.asubmit(user, "room.join", {"room": "lobby", "since": object()})
    assert ack["error"]["code"] == "invalid"


@pytest.mark.parametrize("id", [None, "", "with space", "x" * 65, 7])
async def test_asubmit_of_an_exactly_once_type_needs_a_valid_id(make_user, id):
    user = await make_user()
    await messaging.asubmit(user, "room.join", {"room": "lobby"})
    with pytest.raises(BadFrame):
        await messaging.asubmit(user, "room.post", {"room": "lobby", "body": "x"}, id=id)
    assert await rows() == []


def test_sync_submit_wraps_the_same_coroutine(django_user_model):
    user = django_user_model.objects.create_user(username="sync-user")
    assert messaging.submit(user, "room.join", {"room": "lobby"})["ok"]
    first = messaging.submit(user, "room.post", {"room": "lobby", "body": "sync"}, id="s-1")
    again = messaging.submit(user, "room.post", {"room": "lobby", "body": "sync"}, id="s-1")
    assert first["ok"] and not first["dup"] and again["dup"] and again["d"] == first["d"]
    reused = messaging.submit(user, "room.post", {"room": "lobby", "body": "other"}, id="s-1")
    assert reused["error"]["code"] == "id_reused"


async def test_sync_submit_from_a_worker_thread_reaches_sockets(make_user, open_clients):
    """As a Celery task would: a thread with no event loop, whose call runs on a loop of its own."""
    user = await make_user()
    socket = await open_clients(user)
    await socket.join("lobby")
    acks, connections = [], []
    for i in range(8):
        acks.append(
            await asyncio.to_thread(
                messaging.submit, user, "room.post", {"room": "lobby", "body": f"t{i}"}, id=f"task-{i}"
            )
        )
        connections.append(await database_sync_to_async(open_connections)())
    assert [a["d"]["seq"] for a in acks] == list(range(1, 9))
    msgs = await socket.frames("msg", 8)
    assert [m["d"]["id"] for m in msgs] == [f"task-{i}" for i in range(8)]
    # Each call's loop closed the connections it opened: they do not pile up
    # (one per call if they did; the test's own threads may open one or two).
    assert connections[-1] - connections[0] <= 2, connections


def open_connections() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return cursor.fetchone()[0]


def test_messaging_post_posts_once_per_id(django_user_model):
    django_user_model.objects.create_user(username="system")
    first, again = StringIO(), StringIO()
    call_command("messaging_post", "--room", "news", "--as", "system", "--id", "deploy-42", "deployed", stdout=first)
    call_command("messaging_post", "--room", "news", "--as", "system", "--id", "deploy-42", "deployed", stdout=again)
    a, b = json.loads(first.getvalue()), json.loads(again.getvalue())
    assert a["ok"] and not a["dup"] and b["dup"] and a["d"] == b["d"]
    from messaging.models import Message

    assert list(Message.objects.values_list("body", flat=True)) == ["deployed"]


def test_messaging_post_refusals(django_user_model):
    django_user_model.objects.create_user(username="system")
    with pytest.raises(CommandError):
        call_command("messaging_post", "--room", "news", "--as", "nobody", "--id", "x", "hi", stdout=StringIO())
    with pytest.raises(CommandError):
        call_command("messaging_post", "--room", "news", "--as", "system", "--id", "bad id", "hi", stdout=StringIO())
    out = StringIO()
    with pytest.raises(SystemExit) as exit:
        call_command(
            "messaging_post", "--room", "news", "--as", "system", "--id", "x", "   ", stdout=out, stderr=StringIO()
        )
    assert exit.value.code == 1 and json.loads(out.getvalue())["error"]["code"] == "invalid"
