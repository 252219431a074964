"""One delivery's data or result never fails the other deliveries of its batch (issue 19, finding 3)."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async

from messaging.core import handlers
from messaging.core.claims import claim_key
from messaging.core.exceptions import Invalid
from messaging.core.outcomes import Delivery, Outcome
from messaging.core.pipeline import run_batch
from messaging.core.protocol import Command, encode
from messaging.models import CommandRecord, Message

from .conftest import apply_command, post_delivery

pytestmark = [pytest.mark.django_db(transaction=True)]

HUGE = 2**70  # JSON, and PostgreSQL's jsonb, hold it; orjson writes at most 64 bits


@pytest.fixture
def huge_type():
    """An exactly-once type whose result orjson cannot write."""
    handlers.register(handlers.Handler(type="test.huge", apply=lambda ctx, data: {"n": HUGE}))
    yield "test.huge"
    handlers._registry.pop("test.huge")


@pytest.fixture
def members(django_user_model):
    users = [django_user_model.objects.create_user(username=f"m{n}-{uuid.uuid4().hex[:6]}") for n in range(3)]
    for user in users:
        apply_command(user, "room.join", {"room": "lobby"})
    return users


def test_a_delivery_whose_data_cannot_be_fingerprinted_is_refused_before_any_batch(members):
    deep: object = "x"
    for _ in range(300):
        deep = [deep]
    command = Command(id="deep", t="room.post", d={"room": "lobby", "body": "x", "junk": deep})
    with pytest.raises(Invalid):
        Delivery(members[0], command, handlers.lookup("room.post"), None)


async def test_a_result_orjson_cannot_write_fails_no_other_delivery(members, huge_type, redis_client):
    ana, bob, cid = members
    huge = Delivery(bob, Command(id="huge", t=huge_type, d={}), handlers.lookup(huge_type), {})
    batch = [
        await sync_to_async(post_delivery)(ana, "lobby", "before"),
        huge,
        await sync_to_async(post_delivery)(cid, "lobby", "after"),
    ]
    results = await run_batch(batch)

    assert all(isinstance(result, Outcome) and not result.dup for result in results), results
    assert results[1].data == {"n": HUGE}
    assert encode({"t": "ack", "d": results[1].data}) == '{"t":"ack","d":{"n":%d}}' % HUGE
    assert sorted(await sync_to_async(lambda: list(Message.objects.values_list("body", flat=True)))()) == [
        "after",
        "before",
    ]
    # The posts' results are kept in Redis; the huge one's claim is given back,
    # so its retry is answered from the durable record.
    for delivery in (batch[0], batch[2]):
        assert redis_client.get(delivery.key).startswith(b"r:")
    assert redis_client.get(claim_key(bob.pk, "huge")) is None
    [again] = await run_batch([Delivery(bob, huge.command, huge.handler, {})])
    assert again.dup and again.source == "database" and again.data == {"n": HUGE}
    assert await sync_to_async(CommandRecord.objects.filter(command_id="huge").count)() == 1
