"""`room.search` (PROTOCOL.md 1.2) on real PostgreSQL: every word of `q`, in the user's rooms only,
current bodies only, newest first, in exact pages; and the index that serves it."""

from __future__ import annotations

import uuid
from importlib import import_module

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from messaging.chat.messages import stored_msg_frame
from messaging.chat.search import DOCUMENT, PG_MATCH, words
from messaging.core import pipeline
from messaging.core.exceptions import Forbidden, Invalid
from messaging.core.protocol import Command
from messaging.models import Invitation, Message, Room

from ..support.search_cases import CASES, CORPUS
from .conftest import run_batch

pytestmark = [pytest.mark.django_db(transaction=True)]


def command(t: str, d: dict, id: str | None = None) -> Command:
    return Command(id=id or uuid.uuid4().hex, t=t, d=d)


async def submit(user, t: str, d: dict):
    return await pipeline.submit(user, command(t, d))


async def search(user, q: str, **d):
    return (await submit(user, "room.search", {"q": q, **d})).data


@pytest.fixture
async def people(django_user_model):
    create = sync_to_async(django_user_model.objects.create_user)
    ana, bob = [await create(username=f"{n}-{uuid.uuid4().hex[:6]}", first_name=n) for n in ("ana", "bob")]
    return ana, bob


async def test_every_word_of_q_case_punctuation_and_diacritics(people):
    ana, _ = people
    await submit(ana, "room.join", {"room": "words"})
    for body in CORPUS:
        await submit(ana, "room.post", {"room": "words", "body": body})
    for q, seqs in CASES.items():
        found = await search(ana, q)
        assert [r["seq"] for r in found["results"]] == seqs, q
        assert found["more"] is False


async def test_only_the_users_rooms_current_bodies_and_never_the_deleted(people, django_user_model):
    ana, bob = people
    for user, room in ((ana, "mine"), (bob, "mine"), (bob, "bobs"), (bob, "secret")):
        await submit(user, "room.join", {"room": room})
    await sync_to_async(Room.objects.filter(slug="secret").update)(private=True)
    # ana is only invited to bob's private room: nobody in it.
    await sync_to_async(Invitation.objects.create)(room=await sync_to_async(Room.objects.get)(slug="secret"), user=ana)
    await submit(bob, "room.post", {"room": "bobs", "body": "needle in bobs"})
    await submit(bob, "room.post", {"room": "secret", "body": "needle in secret"})
    kept = (await submit(bob, "room.post", {"room": "mine", "body": "needle kept"})).data["seq"]
    edited = (await submit(ana, "room.post", {"room": "mine", "body": "needle before"})).data["seq"]
    gone = (await submit(ana, "room.post", {"room": "mine", "body": "needle gone"})).data["seq"]
    await submit(ana, "message.edit", {"room": "mine", "seq": edited, "body": "haystack now"})
    await submit(ana, "message.delete", {"room": "mine", "seq": gone})
    assert [(r["room"], r["seq"]) for r in (await search(ana, "needle"))["results"]] == [("mine", kept)]
    assert [r["seq"] for r in (await search(ana, "haystack"))["results"]] == [edited]
    assert (await search(ana, "before"))["results"] == []
    assert {r["room"] for r in (await search(bob, "needle"))["results"]} == {"bobs", "secret", "mine"}
    # One room alone, a member's only.
    assert [r["room"] for r in (await search(bob, "needle", room="bobs"))["results"]] == ["bobs"]
    for room in ("bobs", "secret", "nowhere"):
        with pytest.raises(Forbidden):
            await submit(ana, "room.search", {"q": "needle", "room": room})


async def test_results_are_msg_frames_for_the_viewer(people):
    ana, bob = people
    for user in people:
        await submit(user, "room.join", {"room": "r"})
    await submit(ana, "room.post", {"room": "r", "body": "look here"})
    await submit(ana, "message.edit", {"room": "r", "seq": 1, "body": "look here, edited"})

    @sync_to_async
    def frame(viewer):
        return stored_msg_frame(Message.objects.select_related("sender").get(room__slug="r", seq=1), "r", viewer)["d"]

    assert (await search(ana, "look"))["results"] == [await frame(ana)]
    assert (await search(bob, "look"))["results"] == [await frame(bob)]
    assert "state" in (await frame(ana)) and "state" not in (await frame(bob))


async def test_pages_are_exact_and_never_end_inside_one_instant(people):
    ana, bob = people
    for user in people:
        await submit(user, "room.join", {"room": "r"})
    # Posts of one batch share their `at`: three instants of 4, 1 and 4 posts.
    for sizes in (4, 1, 4):
        batch = [pipeline.prepare(ana, command("room.post", {"room": "r", "body": f"word {n}"})) for n in range(sizes)]
        await sync_to_async(run_batch)(batch)
    stamps = await sync_to_async(lambda: list(Message.objects.order_by("seq").values_list("sent_at", flat=True)))()
    assert len(set(stamps)) == 3, "each batch is one instant"
    seen, before, pages = [], None, []
    while True:
        page = await search(bob, "word", limit=3, **({"before": before} if before else {}))
        pages.append([r["seq"] for r in page["results"]])
        seen += pages[-1]
        if not page["more"]:
            break
        before = page["results"][-1]["at"]
    assert seen == list(range(9, 0, -1))
    # A page of 3 cannot end inside the newest instant of 4: it holds all 4, then 1, then 4.
    assert pages == [[9, 8, 7, 6], [5], [4, 3, 2, 1]]


@pytest.mark.parametrize(
    "d",
    [
        {"q": ""},
        {"q": "x" * 201},
        {"q": 7},
        {"q": "!!! ... ---"},
        {"q": "ok", "limit": 0},
        {"q": "ok", "limit": 51},
        {"q": "ok", "limit": True},
        {"q": "ok", "before": "yesterday"},
        {"q": "ok", "before": "2026-11-29T18:00:00"},
        {"q": "ok", "room": "Not A Slug"},
    ],
)
async def test_bad_searches_are_invalid(people, d):
    with pytest.raises(Invalid):
        pipeline.prepare(people[0], command("room.search", d))


async def test_a_page_fits_in_one_frame(people, settings):
    ana, _ = people
    settings.MESSAGING = {**settings.MESSAGING, "MAX_SEND_BUFFER": 40_000}
    await submit(ana, "room.join", {"room": "big"})
    for n in range(6):
        await submit(ana, "room.post", {"room": "big", "body": f"big {n} " + "\x01" * 3990})
    pages, before = [], None
    while True:
        page = await search(ana, "big", limit=50, **({"before": before} if before else {}))
        pages.append([r["seq"] for r in page["results"]])
        if not page["more"]:
            break
        before = page["results"][-1]["at"]
    assert len(pages) > 1 and all(pages), "each page holds what fits, at least one"
    assert sum(pages, []) == [6, 5, 4, 3, 2, 1]


def test_the_query_is_the_index_expression_and_the_index_serves_it(db):
    migration = import_module("messaging.migrations.0031_message_search")
    assert migration.DOCUMENT == DOCUMENT.replace("BODY", "body")
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute(
            f"EXPLAIN SELECT id FROM messaging_message WHERE {PG_MATCH.replace('%%', '%')}".replace("%s", "'hello'")
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "messaging_message_search" in plan, plan


def test_words_are_runs_of_letters_digits_and_marks():
    assert words("Hello, wörld! foo-bar 3.14 snake_case x😀y ΑΒΓ") == (
        "hello", "wörld", "foo", "bar", "3", "14", "snake", "case", "x", "y", "αβγ",
    )  # fmt: skip
    assert words("a a A") == ("a",)
