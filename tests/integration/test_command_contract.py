"""The contract of a command type, one suite run against both of its forms (docs/INTEGRATION.md, section 6).

`room.post` and `receipt` each have a portable form (`apply`, the ORM's
statements, for any database) and a PostgreSQL form (their batch form: one
statement through the gateway). Every test here runs once per form, on
PostgreSQL, through the pipeline as the server runs it, as
django.contrib.sessions tests each of its backends with one suite: the two
forms must be indistinguishable from outside.
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from asgiref.sync import sync_to_async

from messaging.core import handlers, pipeline
from messaging.core.exceptions import Forbidden, IdReused, Invalid
from messaging.core.outcomes import Outcome
from messaging.core.protocol import Command
from messaging.models import CommandRecord, Membership, Message, Room

pytestmark = [pytest.mark.django_db(transaction=True)]

TYPES = ("room.post", "receipt")


@pytest.fixture(params=["postgresql", "portable"])
def form(request, monkeypatch):
    """The form the suite runs against: the types' PostgreSQL batch forms, or their portable `apply` alone."""
    if request.param == "portable":
        for t in TYPES:
            monkeypatch.setitem(handlers._registry, t, dataclasses.replace(handlers.lookup(t), batch={}))
    assert all((handlers.lookup(t).batch_form("postgresql") is None) == (request.param == "portable") for t in TYPES)
    return request.param


def command(t: str, d: dict, id: str | None = None) -> Command:
    return Command(id=id or uuid.uuid4().hex, t=t, d=d)


async def submit(user, t: str, d: dict, id: str | None = None) -> Outcome:
    return await pipeline.submit(user, command(t, d, id))


@pytest.fixture
async def people(django_user_model, form):
    """ana, bob and cid; ana and bob in rooms `a` and `b`, cid in `a` only (joined before the form applies)."""
    create = sync_to_async(django_user_model.objects.create_user)
    ana, bob, cid = [await create(username=f"{n}-{uuid.uuid4().hex[:6]}", first_name=n) for n in ("ana", "bob", "cid")]
    for user, rooms in ((ana, "ab"), (bob, "ab"), (cid, "a")):
        for room in rooms:
            await submit(user, "room.join", {"room": room})
    return ana, bob, cid


@sync_to_async
def stored(room: str) -> list[tuple[int, str, str]]:
    return list(Message.objects.filter(room__slug=room).order_by("seq").values_list("seq", "body", "client_msg_id"))


@sync_to_async
def record(user, id: str) -> dict | None:
    return CommandRecord.objects.filter(user=user, command_id=id).values_list("result", flat=True).first()


@sync_to_async
def watermarks(user, room: str) -> tuple[int, int]:
    m = Membership.objects.get(user=user, room__slug=room)
    return m.delivered, m.read


@sync_to_async
def states(room: str) -> dict[int, str]:
    return dict(Message.objects.filter(room__slug=room).values_list("seq", "state"))


def posts(*given: tuple) -> list:
    return [
        pipeline.prepare(user, command("room.post", {"room": room, "body": body}, id)) for user, room, body, id in given
    ]


# room.post ----------------------------------------------------------------------------------------------------------


async def test_posts_of_one_batch_take_each_room_s_next_seqs_in_batch_order(people):
    ana, bob, cid = people
    results = await pipeline.run_batch(
        posts((ana, "a", "a1", None), (bob, "b", "b1", None), (cid, "a", "a2", None), (ana, "a", "a3", None))
    )
    assert [(r.data["room"], r.data["seq"]) for r in results] == [("a", 1), ("b", 1), ("a", 2), ("a", 3)]
    assert [body for _, body, _ in await stored("a")] == ["a1", "a2", "a3"]
    assert all(isinstance(r.data["at"], str) and r.data["at"].endswith("Z") for r in results)


async def test_a_post_s_ack_is_its_record_and_its_frame_is_the_message(people):
    ana, _, _ = people
    outcome = await submit(ana, "room.post", {"room": "a", "body": "hello"}, id="p1")
    assert set(outcome.data) == {"room", "seq", "at"} and not outcome.dup
    assert await record(ana, "p1") == outcome.data
    [(room, frame)] = outcome.broadcasts
    assert room == "a" and frame["t"] == "msg"
    assert {k: frame["d"][k] for k in ("room", "seq", "id", "body", "at")} == {
        "room": "a",
        "seq": outcome.data["seq"],
        "id": "p1",
        "body": "hello",
        "at": outcome.data["at"],
    }


async def test_a_post_by_a_non_member_is_forbidden_and_stores_nothing(people):
    ana, _, cid = people
    fine, refused = await pipeline.run_batch(posts((ana, "b", "fine", None), (cid, "b", "not a member", "nm")))
    assert isinstance(refused, Forbidden) and not fine.dup
    assert [body for _, body, _ in await stored("b")] == ["fine"]
    assert await record(cid, "nm") is None


async def test_a_duplicate_redis_forgot_is_answered_from_its_record_and_applied_once(people, redis_client):
    ana, bob, _ = people
    first = await submit(ana, "room.post", {"room": "a", "body": "once"}, id="dup")
    redis_client.flushdb()
    again, other = await pipeline.run_batch(posts((ana, "a", "once", "dup"), (bob, "a", "other", None)))
    assert again.dup and again.source == "database" and again.data == first.data
    assert not other.dup and other.data["seq"] == first.data["seq"] + 1
    assert [id for _, _, id in await stored("a")].count("dup") == 1


async def test_an_id_reused_with_another_payload_is_refused_from_the_record(people, redis_client):
    ana, _, _ = people
    await submit(ana, "room.post", {"room": "a", "body": "first"}, id="reused")
    redis_client.flushdb()
    [refused] = await pipeline.run_batch(posts((ana, "a", "second", "reused")))
    assert isinstance(refused, IdReused)
    assert [body for _, body, _ in await stored("a")] == ["first"]


# receipt ------------------------------------------------------------------------------------------------------------


@pytest.fixture
async def conversation(people):
    """ana posts 1-3 in room `a`; bob and cid are its recipients."""
    ana, bob, cid = people
    for n in range(3):
        await submit(ana, "room.post", {"room": "a", "body": f"m{n}"})
    return ana, bob, cid


async def test_a_receipt_moves_watermarks_forward_only_and_tells_the_room_and_the_sender(conversation):
    ana, bob, cid = conversation
    moved = await submit(bob, "receipt", {"room": "a", "delivered": 2, "read": 1})
    assert moved.data == {"room": "a", "delivered": 2, "read": 1}
    assert await watermarks(bob, "a") == (2, 1)
    [(room, status)] = moved.broadcasts
    assert room == "a" and status == {"t": "status", "d": {"room": "a", "user": bob.pk, "delivered": 2, "read": 1}}
    assert moved.to_users == [], "cid has not received them yet: no message moved"

    back = await submit(bob, "receipt", {"room": "a", "delivered": 1})
    assert back.data == {"room": "a", "delivered": 2, "read": 1} and back.broadcasts == [], "never backwards"

    last = await submit(cid, "receipt", {"room": "a", "delivered": 3})
    assert await states("a") == {1: "delivered", 2: "delivered", 3: "sent"}
    sent_to = [(user, room, frame["d"]["seq"], frame["d"]["state"]) for user, room, frame in last.to_users]
    assert sent_to == [(ana.pk, "a", 1, "delivered"), (ana.pk, "a", 2, "delivered")]


async def test_a_receipt_beyond_the_last_seq_is_invalid_and_moves_nothing(conversation):
    _, bob, _ = conversation
    with pytest.raises(Invalid, match="beyond the room's last seq 3"):
        await submit(bob, "receipt", {"room": "a", "delivered": 4})
    assert await watermarks(bob, "a") == (0, 0)


async def test_a_receipt_of_a_non_member_is_forbidden(conversation):
    _, _, cid = conversation
    with pytest.raises(Forbidden):
        await submit(cid, "receipt", {"room": "b", "read": 1})
    assert not await sync_to_async(Membership.objects.filter(user=cid, room__slug="b").exists)()
    assert await sync_to_async(Room.objects.filter(slug="b").exists)()
