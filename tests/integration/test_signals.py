"""`messaging.signals`: sent once per committed change, on PostgreSQL, in the batch and the portable forms.

Copies of a command (from Redis's window, from the durable record, two in one
batch), refusals and rolled back attempts send nothing; a receiver's failure
changes nothing of the command.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

import messaging
from messaging import signals
from messaging.core import handlers
from messaging.core.claims import reset_claim_store
from messaging.models import Membership, Message
from messaging.transport.tokens import create_token

from .conftest import apply_command, post_delivery, run_batch

pytestmark = [pytest.mark.django_db(transaction=True)]

SIGNALS = ("message_posted", "message_edited", "message_deleted", "member_joined", "member_left")


@pytest.fixture(params=["postgresql", "portable"])
def form(request, monkeypatch):
    """`room.post` in its PostgreSQL batch form, or in its portable `apply` alone."""
    if request.param == "portable":
        monkeypatch.setitem(
            handlers._registry, "room.post", dataclasses.replace(handlers.lookup("room.post"), batch={})
        )
    assert (handlers.lookup("room.post").batch_form("postgresql") is None) == (request.param == "portable")
    return request.param


@pytest.fixture
def sent():
    """Per signal's name, the (sender, kwargs) of every time it was sent, while the test runs."""
    calls: dict[str, list[tuple[type, dict]]] = {name: [] for name in SIGNALS}
    receivers = {}
    for name in SIGNALS:

        def receiver(sender, signal, name=name, **kwargs):
            calls[name].append((sender, kwargs))

        getattr(signals, name).connect(receiver, weak=False, dispatch_uid=f"test-{name}")
        receivers[name] = receiver
    yield calls
    for name in SIGNALS:
        getattr(signals, name).disconnect(dispatch_uid=f"test-{name}")


@pytest.fixture
def people(django_user_model):
    ana, bob = (django_user_model.objects.create_user(username=f"{n}-{uuid.uuid4().hex[:6]}") for n in ("ana", "bob"))
    for user in (ana, bob):
        apply_command(user, "room.join", {"room": "lobby"})
    return ana, bob


def test_a_post_is_signalled_once_with_its_message(people, form, sent, redis_client):
    ana, _ = people
    outcome = apply_command(ana, "room.post", {"room": "lobby", "body": "hello"}, id="p-1")
    [(sender, kwargs)] = sent["message_posted"]
    assert sender is Message
    assert kwargs["room"] == "lobby" and kwargs["seq"] == outcome.data["seq"] == 1
    assert kwargs["user"] == ana and kwargs["command_id"] == "p-1"
    message = kwargs["message"]
    assert (message["room"], message["seq"], message["id"], message["body"]) == ("lobby", 1, "p-1", "hello")
    assert message["sender"]["id"] == ana.pk and message["at"] == outcome.data["at"]
    # A copy answered from Redis's window, then (Redis forgot it) from the durable record.
    assert apply_command(ana, "room.post", {"room": "lobby", "body": "hello"}, id="p-1").dup
    redis_client.flushdb()
    reset_claim_store()
    again = apply_command(ana, "room.post", {"room": "lobby", "body": "hello"}, id="p-1")
    assert again.dup and again.data == outcome.data
    assert len(sent["message_posted"]) == 1
    assert Message.objects.filter(room__slug="lobby").count() == 1


def test_copies_in_one_batch_and_posts_of_many_are_each_signalled_once(people, form, sent):
    ana, bob = people
    outsider = type(ana).objects.create_user(username=f"cid-{uuid.uuid4().hex[:6]}")
    batch = [
        post_delivery(ana, "lobby", "one", id="b-1"),
        post_delivery(bob, "lobby", "two", id="b-2"),
        post_delivery(ana, "lobby", "one", id="b-1"),
        post_delivery(outsider, "lobby", "refused", id="b-3"),
    ]
    results = run_batch(batch)
    assert [getattr(r, "dup", None) for r in results[:3]].count(False) == 2
    by_id = {kwargs["command_id"]: kwargs for _, kwargs in sent["message_posted"]}
    assert sorted(by_id) == ["b-1", "b-2"] and len(sent["message_posted"]) == 2
    assert {by_id["b-1"]["seq"], by_id["b-2"]["seq"]} == {1, 2}
    assert by_id["b-2"]["user"] == bob and by_id["b-2"]["message"]["body"] == "two"


def test_a_rolled_back_attempt_sends_nothing(people, sent, redis_client):
    """An edit's copy that Redis forgot: its handler runs again and changes the message, then
    the record's unique constraint rolls that transaction back, and the record answers."""
    ana, _ = people
    apply_command(ana, "room.post", {"room": "lobby", "body": "draft"}, id="m-1")
    first = apply_command(ana, "message.edit", {"room": "lobby", "seq": 1, "body": "final"}, id="e-1")
    redis_client.flushdb()
    reset_claim_store()
    again = apply_command(ana, "message.edit", {"room": "lobby", "seq": 1, "body": "final"}, id="e-1")
    assert again.dup and again.data == first.data
    assert Message.objects.get(room__slug="lobby", seq=1).version == 2
    assert [kwargs["command_id"] for _, kwargs in sent["message_edited"]] == ["e-1"]


def test_edits_and_deletes_are_signalled_once(people, sent, redis_client):
    ana, _ = people
    apply_command(ana, "room.post", {"room": "lobby", "body": "draft"}, id="m-1")
    for _ in range(2):
        apply_command(ana, "message.edit", {"room": "lobby", "seq": 1, "body": "final"}, id="e-1")
    redis_client.flushdb()
    reset_claim_store()
    assert apply_command(ana, "message.edit", {"room": "lobby", "seq": 1, "body": "final"}, id="e-1").dup
    [(sender, edited)] = sent["message_edited"]
    assert sender is Message and (edited["room"], edited["seq"], edited["user"]) == ("lobby", 1, ana)
    assert edited["command_id"] == "e-1" and edited["message"]["body"] == "final"
    for _ in range(2):
        apply_command(ana, "message.delete", {"room": "lobby", "seq": 1}, id="d-1")
    # Another delete of the deleted message changes nothing, and says so to nobody.
    apply_command(ana, "message.delete", {"room": "lobby", "seq": 1}, id="d-2")
    [(_, deleted)] = sent["message_deleted"]
    assert (deleted["room"], deleted["seq"], deleted["user"], deleted["command_id"]) == ("lobby", 1, ana, "d-1")
    assert deleted["message"]["seq"] == 1


def test_joins_and_leaves_are_signalled_when_the_membership_changes(people, sent):
    ana, bob = people
    cid = type(ana).objects.create_user(username=f"cid-{uuid.uuid4().hex[:6]}")
    apply_command(cid, "room.join", {"room": "lobby"}, id="j-1")
    apply_command(cid, "room.join", {"room": "lobby"}, id="j-2")  # a member already
    [(sender, joined)] = sent["member_joined"]
    assert sender is Membership
    assert joined == {"room": "lobby", "user": cid, "by": None, "command_id": "j-1"}
    apply_command(cid, "room.leave", {"room": "lobby"}, id="l-1")
    [(sender, left)] = sent["member_left"]
    assert sender is Membership and left == {"room": "lobby", "user": cid, "by": None, "command_id": "l-1"}
    # A room's creator is its first member; a moderator's removal names the moderator.
    apply_command(ana, "room.create", {"room": "ana-room"}, id="c-1")
    apply_command(bob, "room.join", {"room": "ana-room"}, id="j-3")
    apply_command(ana, "room.remove", {"room": "ana-room", "user": bob.pk}, id="x-1")
    assert [(k["room"], k["user"], k["command_id"]) for _, k in sent["member_joined"][1:]] == [
        ("ana-room", ana, "c-1"),
        ("ana-room", bob, "j-3"),
    ]
    assert [(k["user"], k["by"], k["command_id"]) for _, k in sent["member_left"][1:]] == [(bob, ana, "x-1")]


def test_a_failing_receiver_is_logged_and_the_command_stands(people, form, sent, caplog):
    ana, _ = people

    def broken(sender, **kwargs):
        raise RuntimeError("the receiver broke")

    signals.message_posted.connect(broken, weak=False, dispatch_uid="test-broken")
    try:
        with caplog.at_level(logging.ERROR, logger="messaging.signals"):
            outcome = apply_command(ana, "room.post", {"room": "lobby", "body": "still"}, id="f-1")
    finally:
        signals.message_posted.disconnect(dispatch_uid="test-broken")
    assert not outcome.dup and outcome.data["seq"] == 1
    assert Message.objects.filter(room__slug="lobby", client_msg_id="f-1").exists()
    # The other receiver still heard it; the failure is in the log with its traceback.
    assert [k["command_id"] for _, k in sent["message_posted"]] == ["f-1"]
    [record] = [r for r in caplog.records if r.name == "messaging.signals"]
    assert record.exc_info and "the receiver broke" in str(record.exc_info[1])


def test_messaging_submit_sends_them_too(people, form, sent):
    ana, _ = people
    first = messaging.submit(ana, "room.post", {"room": "lobby", "body": "sync"}, id="s-1")
    again = messaging.submit(ana, "room.post", {"room": "lobby", "body": "sync"}, id="s-1")
    assert first["ok"] and again["dup"]
    assert [(k["command_id"], k["seq"]) for _, k in sent["message_posted"]] == [("s-1", first["d"]["seq"])]


async def test_commands_over_http_send_them_too(people, form, sent):
    ana, _ = people
    token = await sync_to_async(lambda: create_token(ana, "test")[1])()
    client = AsyncClient()
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "h-1"}
    body = '{"t": "room.post", "d": {"room": "lobby", "body": "over http"}}'
    for _ in range(2):
        response = await client.post("/api/commands", data=body, content_type="application/json", headers=headers)
        assert response.status_code == 200
    [(_, kwargs)] = sent["message_posted"]
    assert kwargs["command_id"] == "h-1" and kwargs["message"]["body"] == "over http"
