"""Batches of exactly-once commands: one claim round trip, one result round trip, each command its own outcome."""
from __future__ import annotations

import uuid

import pytest
import redis

from messaging import handlers
from messaging.idempotency import ClaimBusy, Delivery, execute_many, reset_claim_store
from messaging.models import Message, Room
from messaging.protocol import Command

from .conftest import apply_command

pytestmark = [pytest.mark.django_db(transaction=True)]


def delivery(user, room: str, body: str, id: str | None = None) -> Delivery:
    d = {"room": room, "body": body}
    handler = handlers.lookup("room.post")
    return Delivery(user, Command(id=id or uuid.uuid4().hex, t="room.post", d=d), handler, handlers.validate(handler, d))


@pytest.fixture
def users(django_user_model):
    """Three users; ana and bob in rooms `a` and `b`, cid in `a` only."""
    ana, bob, cid = (django_user_model.objects.create_user(username=f"{n}-{uuid.uuid4().hex[:6]}") for n in "abc")
    for user, rooms in [(ana, "ab"), (bob, "ab"), (cid, "a")]:
        for room in rooms:
            apply_command(user, "room.join", {"room": room})
    return ana, bob, cid


def test_the_second_copy_of_a_command_in_a_batch_waits_for_the_first(users, redis_client):
    ana, _, _ = users
    first, second = execute_many([delivery(ana, "a", "twice", id="same"), delivery(ana, "a", "twice", id="same")])
    assert not first.dup and isinstance(second, ClaimBusy)
    (again,) = execute_many([delivery(ana, "a", "twice", id="same")])
    assert again.dup and again.source == "redis" and again.data == first.data
    assert Message.objects.filter(client_msg_id="same").count() == 1


@pytest.fixture
def redis_down(settings):
    """The claim store's Redis does not answer: every claim is "unknown"."""
    settings.MESSAGING = {**settings.MESSAGING, "REDIS_URL": "redis://127.0.0.1:1/0"}
    reset_claim_store()
    yield
    reset_claim_store()


def test_two_copies_of_one_command_in_a_batch_apply_once_with_redis_down(users, redis_down):
    ana, bob, _ = users
    results = execute_many([
        delivery(ana, "a", "twice", id="same"),
        delivery(bob, "a", "other"),
        delivery(ana, "a", "twice", id="same"),
    ])
    first, other, second = results
    assert not first.dup and not other.dup
    assert second.dup and second.source == "database" and second.data == first.data
    assert Message.objects.filter(client_msg_id="same").count() == 1
    assert sorted([first.data["seq"], other.data["seq"]]) == [1, 2]
    assert Room.objects.get(slug="a").last_seq == 2, "the undone attempt used up no seq"


def test_claims_still_work_after_redis_forgets_its_scripts(users, own_redis, settings):
    ana, bob, _ = users
    settings.MESSAGING = {**settings.MESSAGING, "REDIS_URL": own_redis.url}
    reset_claim_store()
    first = execute_many([delivery(ana, "a", "one", id="s1"), delivery(bob, "a", "two")])
    redis.Redis.from_url(own_redis.url).script_flush()
    again = execute_many([delivery(ana, "a", "one", id="s1"), delivery(bob, "a", "three")])
    assert again[0].dup and again[0].source == "redis" and again[0].data == first[0].data
    assert not again[1].dup and again[1].data["seq"] == 3
    reset_claim_store()
