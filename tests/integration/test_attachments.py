"""`room.post`'s `attachments` (PROTOCOL.md 1.2, "Files"), in both forms of `room.post`, and what a
message's delete does to its files, on real PostgreSQL, Redis and a FileSystemStorage."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import os
import time
import uuid
from datetime import timedelta

import orjson
import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.db import transaction
from django.test import AsyncClient
from django.utils import timezone

from messaging.chat.attachments import kept, shown
from messaging.chat.posts import posts_statement
from messaging.core import handlers, pipeline
from messaging.core.exceptions import Invalid
from messaging.core.protocol import Command
from messaging.events.models import Event
from messaging.files.models import Upload
from messaging.files.storage import BodyReader, store
from messaging.files.uploads import record
from messaging.ids import uuid7
from messaging.models import Invitation, Message, Room
from messaging.transport.tokens import create_token

from ..support.traces import where_found
from ..support.uploads import PDF, PNG
from .conftest import database_conninfo

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(params=["postgresql", "portable"])
def form(request, monkeypatch):
    """`room.post` in its PostgreSQL batch form, or in its portable `apply` alone."""
    if request.param == "portable":
        monkeypatch.setitem(
            handlers._registry, "room.post", dataclasses.replace(handlers.lookup("room.post"), batch={})
        )
    return request.param


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "media" / "messaging" / "uploads"


@pytest.fixture
async def people(django_user_model, form, media):
    """ana, bob and cid; ana and bob in room `a`, cid in room `c`; each with an upload ready."""
    create = sync_to_async(django_user_model.objects.create_user)
    ana, bob, cid = [await create(username=f"{n}-{uuid.uuid4().hex[:6]}", first_name=n) for n in ("ana", "bob", "cid")]
    for user, room in ((ana, "a"), (bob, "a"), (cid, "c")):
        await submit(user, "room.join", {"room": room})
    return ana, bob, cid


def uploaded(user, data: bytes = PNG, name: str = "cat.png", content_type: str = "image/png") -> str:
    """An upload of `user`, through the storage and the record the HTTP view uses; its id."""
    stored = store(BodyReader(io.BytesIO(data), 10**6), uuid7())
    return str(record(user, uuid.uuid4().hex, name, content_type, stored).upload.pk)


upload = sync_to_async(uploaded)


def command(t: str, d: dict, id: str | None = None) -> Command:
    return Command(id=id or uuid.uuid4().hex, t=t, d=d)


async def submit(user, t: str, d: dict, id: str | None = None):
    return await pipeline.submit(user, command(t, d, id))


def post(user, room: str, files: list[str], body: str | None = "", id: str | None = None):
    d = {"room": room, "attachments": files} | ({} if body is None else {"body": body})
    return pipeline.prepare(user, command("room.post", d, id))


@sync_to_async
def message(room: str, seq: int) -> Message:
    return Message.objects.get(room__slug=room, seq=seq)


@sync_to_async
def upload_rows(*ids: str) -> list[tuple]:
    return list(Upload.objects.filter(pk__in=ids).order_by("pk").values_list("pk", "room__slug", "seq"))


@sync_to_async
def posted_event(room: str, seq: int) -> dict:
    return next(e.data for e in Event.objects.filter(type="message.posted", room=room) if e.data["seq"] == seq)


async def test_a_post_with_files_lists_them_in_its_frame_its_event_its_row_and_its_history(people, media):
    ana, bob, _ = people
    png, pdf = await upload(ana, PNG, "cat.png"), await upload(ana, PDF, "notes.pdf", "application/pdf")
    outcome = await submit(ana, "room.post", {"room": "a", "body": "", "attachments": [pdf, png]}, id="f-1")
    seq = outcome.data["seq"]
    [(_, frame)] = outcome.broadcasts
    files = [
        {"upload": pdf, "name": "notes.pdf", "size": len(PDF), "content_type": "application/pdf",
         "url": f"/api/uploads/{pdf}"},
        {"upload": png, "name": "cat.png", "size": len(PNG), "content_type": "image/png", "url": f"/api/uploads/{png}"},
    ]  # fmt: skip
    assert frame["d"]["body"] == "" and frame["d"]["attachments"] == files
    assert (await message("a", seq)).attachments == [{k: v for k, v in f.items() if k != "url"} for f in files]
    assert await upload_rows(png, pdf) == sorted([(uuid.UUID(png), "a", seq), (uuid.UUID(pdf), "a", seq)])
    assert (await posted_event("a", seq))["attachments"] == files
    page = await submit(bob, "room.history", {"room": "a", "before": seq + 1})
    assert page.data["messages"][-1]["attachments"] == files
    # A post without files lists none.
    plain = await submit(ana, "room.post", {"room": "a", "body": "words"})
    assert "attachments" not in plain.broadcasts[0][1]["d"]
    assert (await message("a", plain.data["seq"])).attachments is None


async def test_a_body_may_be_left_out_only_beside_files(people):
    ana, _, _ = people
    png = await upload(ana)
    [ok] = await pipeline.run_batch([post(ana, "a", [png], body=None)])
    assert ok.broadcasts[0][1]["d"]["body"] == ""
    with pytest.raises(Invalid):
        post(ana, "a", [], body="  ")
    with pytest.raises(Invalid):
        pipeline.prepare(ana, command("room.post", {"room": "a"}))


@pytest.mark.parametrize(
    "given",
    [
        [str(uuid.uuid4()) for _ in range(11)],
        "not a list",
        [7],
        ["not-an-id"],
        ["{id}", "{id}"],
    ],
    ids=["eleven", "not a list", "a number", "not an id", "twice"],
)
async def test_attachments_must_be_at_most_ten_distinct_upload_ids(people, given):
    ana, _, _ = people
    png = await upload(ana)
    given = [png if item == "{id}" else item for item in given] if isinstance(given, list) else given
    with pytest.raises(Invalid):
        pipeline.prepare(ana, command("room.post", {"room": "a", "body": "x", "attachments": given}))


async def test_files_not_the_senders_own_or_posted_already_refuse_the_post_and_change_nothing(people):
    ana, bob, _ = people
    bobs, anas = await upload(bob), await upload(ana)
    for files in ([bobs], [str(uuid.uuid4())], [anas, bobs]):
        [refused] = await pipeline.run_batch([post(ana, "a", files)])
        assert isinstance(refused, Invalid), files
    first = await submit(ana, "room.post", {"room": "a", "body": "", "attachments": [anas]})
    [again] = await pipeline.run_batch([post(ana, "a", [anas])])
    assert isinstance(again, Invalid) and "already" in again.message
    assert await sync_to_async(Message.objects.filter(room__slug="a").count)() == 1
    assert await upload_rows(anas, bobs) == sorted(
        [(uuid.UUID(anas), "a", first.data["seq"]), (uuid.UUID(bobs), None, None)]
    )


async def test_a_batch_mixes_posts_with_and_without_files(people):
    ana, bob, cid = people
    anas, bobs, cids = await upload(ana), await upload(bob), await upload(cid)
    results = await pipeline.run_batch(
        [
            post(ana, "a", [anas], "one"),
            post(bob, "a", [], "two"),
            post(cid, "c", [anas], "three"),
            post(bob, "a", [bobs]),
        ]
    )
    assert [type(r).__name__ for r in results] == ["Outcome", "Outcome", "Invalid", "Outcome"]
    assert [r.data["seq"] for r in results if not isinstance(r, Exception)] == [1, 2, 3]
    assert await upload_rows(anas, bobs, cids) == sorted(
        [(uuid.UUID(anas), "a", 1), (uuid.UUID(bobs), "a", 3), (uuid.UUID(cids), None, None)]
    )


async def test_one_upload_in_two_posts_of_a_batch_goes_to_the_first(people):
    ana, _, _ = people
    png = await upload(ana)
    first, second = await pipeline.run_batch([post(ana, "a", [png], "x"), post(ana, "a", [png], "y")])
    assert not isinstance(first, Exception) and isinstance(second, Invalid)
    assert await upload_rows(png) == [(uuid.UUID(png), "a", first.data["seq"])]


async def test_a_duplicate_with_files_redis_forgot_is_answered_from_its_record(people, redis_client):
    ana, _, _ = people
    png = await upload(ana)
    first = await submit(ana, "room.post", {"room": "a", "body": "", "attachments": [png]}, id="dup")
    redis_client.flushdb()
    [again] = await pipeline.run_batch([post(ana, "a", [png], id="dup")])
    assert again.dup and again.data == first.data


def hold_in_a_transaction(user, room: str, files: list[str], id: str) -> psycopg.Connection:
    """`room.post` of `files` by `user` with the batch statement, on a connection of its own, not committed."""
    delivery = post(user, room, files, id=id)
    found = {str(u.pk): u for u in Upload.objects.filter(pk__in=files)}
    rows = [kept(found[f]) for f in files]
    sql, params = posts_statement(
        [(delivery.context_for(), delivery.data, delivery.fingerprint)], orjson.dumps([[1, rows, shown(rows)]]).decode()
    )
    conn = psycopg.connect(database_conninfo())
    conn.execute(sql, params)
    return conn


def waiting_for_a_lock() -> bool:
    with psycopg.connect(database_conninfo(), autocommit=True) as conn:
        return bool(
            conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()[0]
        )


async def race(other: psycopg.Connection, user, files: list[str], id: str):
    """This post of `files` sent while `other` holds them, answered once `other` has committed."""
    answering = asyncio.ensure_future(pipeline.run_batch([post(user, "a", files, id=id)]))
    deadline = time.monotonic() + 30
    while not await asyncio.to_thread(waiting_for_a_lock):
        assert time.monotonic() < deadline and not answering.done(), "the post did not wait for the files' rows"
        await asyncio.sleep(0.05)
    await asyncio.to_thread(other.commit)
    other.close()
    [answer] = await answering
    return answer


async def test_a_copy_that_waits_while_its_other_attempt_commits_gets_the_original_answer(people):
    ana, _, _ = people
    png = await upload(ana)
    other = await sync_to_async(hold_in_a_transaction)(ana, "a", [png], "same")
    answer = await race(other, ana, [png], "same")
    assert answer.dup and answer.data["seq"] == 1
    assert await sync_to_async(Message.objects.filter(room__slug="a").count)() == 1


async def test_a_post_whose_file_another_post_takes_while_it_waits_is_refused(people):
    ana, _, _ = people
    png = await upload(ana)
    other = await sync_to_async(hold_in_a_transaction)(ana, "a", [png], "first")
    answer = await race(other, ana, [png], "second")
    assert isinstance(answer, Invalid) and "already" in answer.message
    assert await upload_rows(png) == [(uuid.UUID(png), "a", 1)]


async def test_a_delete_takes_its_files_rows_bytes_and_names_with_it(people, media):
    ana, bob, _ = people
    marker = f"secret-{uuid.uuid4().hex}"
    png = await upload(ana, PNG, f"{marker}.png")
    seq = (await submit(ana, "room.post", {"room": "a", "body": "look", "attachments": [png]})).data["seq"]
    assert (media / png).exists() and await sync_to_async(where_found)(marker)
    deleted = await submit(ana, "message.delete", {"room": "a", "seq": seq})
    assert deleted.data["seq"] == seq
    assert await upload_rows(png) == [] and not (media / png).exists()
    assert (await message("a", seq)).attachments is None
    assert "attachments" not in await posted_event("a", seq)
    assert await sync_to_async(where_found)(marker) == set()
    page = await submit(bob, "room.history", {"room": "a", "before": seq + 1})
    assert "attachments" not in page.data["messages"][-1]


async def test_a_delete_that_rolls_back_keeps_the_files(people, media):
    ana, _, _ = people
    png = await upload(ana)
    await submit(ana, "room.post", {"room": "a", "body": "", "attachments": [png]})

    @sync_to_async
    def delete_then_fail():
        with pytest.raises(RuntimeError), transaction.atomic():
            Upload.objects.filter(pk=png).delete()
            raise RuntimeError("the rest of the delete failed")

    await delete_then_fail()
    assert (media / png).exists() and len(await upload_rows(png)) == 1


async def test_a_posted_file_is_served_to_the_rooms_members_only(people, media, django_user_model):
    ana, bob, cid = people
    png = await upload(ana)
    await submit(ana, "room.post", {"room": "a", "body": "", "attachments": [png]})
    dan = await sync_to_async(django_user_model.objects.create_user)(username=f"dan-{uuid.uuid4().hex[:6]}")
    # An invitee of the room is nobody in it (PROTOCOL.md 1.2).
    await sync_to_async(Invitation.objects.create)(room=await sync_to_async(Room.objects.get)(slug="a"), user=dan)

    async def fetch(user) -> int:
        token = await sync_to_async(lambda: create_token(user, "t")[1])()
        response = await AsyncClient().get(f"/api/uploads/{png}", headers={"Authorization": f"Bearer {token}"})
        if response.streaming:
            b"".join([chunk async for chunk in response])
        return response.status_code

    assert [await fetch(user) for user in (ana, bob, cid, dan)] == [200, 200, 404, 404]
    await submit(bob, "room.leave", {"room": "a"})
    assert await fetch(bob) == 404


async def test_prune_uploads_removes_unposted_ones_past_the_retention_and_orphan_files(people, media, settings):
    ana, _, _ = people
    old, new, posted = await upload(ana), await upload(ana), await upload(ana)
    await submit(ana, "room.post", {"room": "a", "body": "", "attachments": [posted]})
    day_ago = timezone.now() - timedelta(seconds=settings.MESSAGING.get("UPLOAD_RETENTION", 86400) + 60)
    await sync_to_async(Upload.objects.filter(pk__in=[old, posted]).update)(created_at=day_ago)
    orphan_old, orphan_new = media / "left-by-a-crash", media / "being-written"
    for orphan in (orphan_old, orphan_new):
        orphan.write_bytes(b"x")
    os.utime(orphan_old, (day_ago.timestamp(), day_ago.timestamp()))
    await sync_to_async(call_command)("prune_uploads", stdout=io.StringIO())
    assert [row[0] for row in await upload_rows(old, new, posted)] == sorted([uuid.UUID(new), uuid.UUID(posted)])
    assert sorted(p.name for p in media.iterdir()) == sorted([new, posted, orphan_new.name])


async def test_a_users_deletion_takes_their_files_with_it(people, media):
    ana, _, _ = people
    png = await upload(ana)
    assert (media / png).exists()
    await sync_to_async(ana.delete)()
    assert await upload_rows(png) == [] and not (media / png).exists()
