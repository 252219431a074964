"""`message.edit` and `message.delete` (PROTOCOL.md 1.1) under the seven rules
of exactly-once effects, on real PostgreSQL and Redis."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from messaging.models import CommandRecord, Message, MessageVersion

pytestmark = [pytest.mark.django_db(transaction=True)]


def stored(seq: int, room: str = "lobby") -> dict:
    return (
        Message.objects.filter(room__slug=room, seq=seq)
        .values("body", "version", "rev", "edited_at", "deleted_at")
        .get()
    )


message_row = database_sync_to_async(stored)


def last_rev(room: str = "lobby") -> int:
    from messaging.models import Room

    return Room.objects.get(slug=room).last_rev


room_rev = database_sync_to_async(last_rev)


async def posted(client, body: str = "helo", room: str = "lobby") -> int:
    ack = await client.call("room.post", {"room": room, "body": body})
    assert ack["ok"], ack
    return ack["d"]["seq"]


async def test_an_edit_changes_the_body_once_and_a_retry_gets_the_original_ack(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    await ana.join("lobby")
    seq = await posted(ana)
    acks = [
        await ana.call("message.edit", {"room": "lobby", "seq": seq, "body": " hello "}, id="fix-1") for _ in range(3)
    ]
    assert [a["ok"] for a in acks] == [True] * 3 and [a["dup"] for a in acks] == [False, True, True]
    assert acks[0]["d"] == acks[2]["d"]
    assert set(acks[0]["d"]) == {"room", "seq", "version", "edited_at"} and acks[0]["d"]["version"] == 2
    row = await message_row(seq)
    assert row["body"] == "hello" and row["version"] == 2 and row["rev"] == 2
    assert await room_rev() == 2
    (edit,) = await ana.frames("msg.edit", 1)
    assert edit["d"] == {
        "room": "lobby",
        "seq": seq,
        "id": (await ana.frames("msg", 1))[0]["d"]["id"],
        "body": "hello",
        "version": 2,
        "edited_at": acks[0]["d"]["edited_at"],
        "rev": 2,
    }
    assert await ana.nothing_more()


async def test_concurrent_copies_of_an_edit_on_several_sockets_apply_once(make_user, open_clients):
    user = await make_user("ana")
    sockets = [await open_clients(user) for _ in range(5)]
    for ws in sockets:
        await ws.join("lobby")
    seq = await posted(sockets[0])
    await asyncio.gather(
        *(ws.send("message.edit", {"room": "lobby", "seq": seq, "body": "once"}, id="e") for ws in sockets)
    )
    acks = await asyncio.gather(*(ws.ack("e") for ws in sockets))
    assert all(a["ok"] for a in acks), acks
    assert sorted(a["dup"] for a in acks) == [False] + [True] * 4
    assert len({str(a["d"]) for a in acks}) == 1
    assert (await message_row(seq))["version"] == 2
    assert await database_sync_to_async(MessageVersion.objects.count)() == 1


async def test_each_edit_raises_the_version_and_takes_the_next_rev(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    await ana.join("lobby")
    seq = await posted(ana)
    versions = [
        (await ana.call("message.edit", {"room": "lobby", "seq": seq, "body": f"v{n}"}))["d"]["version"]
        for n in range(3)
    ]
    assert versions == [2, 3, 4]
    frames = await ana.frames("msg.edit", 3)
    assert [(f["d"]["version"], f["d"]["rev"], f["d"]["body"]) for f in frames] == [
        (2, 2, "v0"),
        (3, 3, "v1"),
        (4, 4, "v2"),
    ]


async def test_an_id_reused_for_another_edit_is_refused_and_changes_nothing(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    await ana.join("lobby")
    seq = await posted(ana)
    assert (await ana.call("message.edit", {"room": "lobby", "seq": seq, "body": "one"}, id="x"))["ok"]
    other_body = await ana.call("message.edit", {"room": "lobby", "seq": seq, "body": "two"}, id="x")
    as_delete = await ana.call("message.delete", {"room": "lobby", "seq": seq}, id="x")
    assert other_body["error"]["code"] == as_delete["error"]["code"] == "id_reused"
    row = await message_row(seq)
    assert row["body"] == "one" and row["version"] == 2 and row["deleted_at"] is None


async def test_only_the_sender_edits_and_a_stranger_is_forbidden(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    eve = await open_clients(await make_user("eve"))
    await ana.join("lobby")
    await bob.join("lobby")
    seq = await posted(ana)
    by_bob = await bob.call("message.edit", {"room": "lobby", "seq": seq, "body": "mine now"})
    by_eve = await eve.call("message.edit", {"room": "lobby", "seq": seq, "body": "mine now"})
    eve_delete = await eve.call("message.delete", {"room": "lobby", "seq": seq})
    bob_delete = await bob.call("message.delete", {"room": "lobby", "seq": seq})
    assert [a["error"]["code"] for a in (by_bob, by_eve, eve_delete, bob_delete)] == ["forbidden"] * 4
    assert not any(a["error"]["retry"] for a in (by_bob, by_eve, eve_delete, bob_delete))
    row = await message_row(seq)
    assert row["body"] == "helo" and row["version"] == 1 and await room_rev() == 1
    # Refusals are not remembered: the same id applies once fixed (by the sender).
    assert await database_sync_to_async(CommandRecord.objects.filter(type__startswith="message.").count)() == 0


async def test_staff_delete_any_message_but_do_not_edit_it(make_user, open_clients, django_user_model):
    ana = await open_clients(await make_user("ana"))
    mod_user = await make_user("mod")
    mod_user.is_staff = True
    await database_sync_to_async(mod_user.save)()
    mod = await open_clients(mod_user)
    await ana.join("lobby")
    await mod.join("lobby")
    seq = await posted(ana)
    assert (await mod.call("message.edit", {"room": "lobby", "seq": seq, "body": "x"}))["error"]["code"] == "forbidden"
    ack = await mod.call("message.delete", {"room": "lobby", "seq": seq})
    assert ack["ok"] and ack["d"]["version"] == 2
    version = await database_sync_to_async(lambda: MessageVersion.objects.values("kind", "by_id").get())()
    assert version == {"kind": "delete", "by_id": mod_user.pk}


async def test_unknown_seq_and_bad_data_are_invalid(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    await ana.join("lobby")
    await posted(ana)
    cases = [
        ("message.edit", {"room": "lobby", "seq": 2, "body": "x"}),
        ("message.edit", {"room": "lobby", "seq": 1, "body": "   "}),
        ("message.edit", {"room": "lobby", "seq": 0, "body": "x"}),
        ("message.edit", {"room": "lobby", "seq": "1", "body": "x"}),
        ("message.edit", {"room": "lobby", "seq": 1, "body": "x" * 4001}),
        ("message.delete", {"room": "lobby", "seq": 99}),
        ("message.delete", {"room": "lobby", "seq": True}),
        ("message.delete", {"room": "Lobby", "seq": 1}),
    ]
    for t, d in cases:
        ack = await ana.call(t, d)
        assert ack["error"]["code"] == "invalid", (t, d, ack)
    assert (await message_row(1))["version"] == 1 and await room_rev() == 1


async def test_a_delete_leaves_a_tombstone_without_the_body(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "EDIT_HISTORY_RETENTION": 3600}
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    seq = await posted(ana, "a secret")
    assert (await ana.call("message.edit", {"room": "lobby", "seq": seq, "body": "another secret"}))["ok"]
    kept = await database_sync_to_async(lambda: list(MessageVersion.objects.values_list("previous_body", flat=True)))()
    assert kept == ["a secret"]
    ack = await ana.call("message.delete", {"room": "lobby", "seq": seq}, id="del")
    assert ack["ok"] and ack["d"]["version"] == 3 and set(ack["d"]) == {"room", "seq", "version", "deleted_at"}
    (frame,) = await bob.frames("msg.delete", 1)
    assert frame["d"]["version"] == 3 and frame["d"]["rev"] == 3 and frame["d"]["deleted_at"] == ack["d"]["deleted_at"]
    assert "body" not in frame["d"]
    row = await message_row(seq)
    assert row["body"] == "" and row["deleted_at"] is not None
    bodies = await database_sync_to_async(
        lambda: list(MessageVersion.objects.values_list("previous_body", flat=True))
    )()
    assert bodies == [None, None]
    # Nothing of it anywhere in the app's tables.
    from django.db import connection

    def anywhere() -> int:
        with connection.cursor() as cursor:
            found = 0
            for table in ("messaging_message", "messaging_messageversion", "messaging_commandrecord"):
                cursor.execute(f"SELECT count(*) FROM {table} t WHERE t::text LIKE %s", ["%secret%"])
                found += cursor.fetchone()[0]
            return found

    assert await database_sync_to_async(anywhere)() == 0
    # A new joiner sees the tombstone in its place.
    cat = await open_clients(await make_user("cat"))
    await cat.join("lobby")
    (msg,) = await cat.frames("msg", 1)
    assert msg["d"]["deleted"] is True and msg["d"]["body"] == "" and msg["d"]["version"] == 3
    assert msg["d"]["seq"] == seq and msg["d"]["deleted_at"] == ack["d"]["deleted_at"]


async def test_editing_a_deleted_message_is_invalid_and_deleting_it_again_changes_nothing(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    await ana.join("lobby")
    seq = await posted(ana)
    first = await ana.call("message.delete", {"room": "lobby", "seq": seq})
    await ana.frames("msg", 1)
    await ana.frames("msg.delete", 1)
    edit = await ana.call("message.edit", {"room": "lobby", "seq": seq, "body": "back"})
    assert edit["error"]["code"] == "invalid"
    again = await ana.call("message.delete", {"room": "lobby", "seq": seq})
    assert again["ok"] and again["dup"] is False and again["d"] == first["d"]
    react = await ana.call("reaction.add", {"room": "lobby", "seq": seq})
    assert react["error"]["code"] == "invalid"
    assert await ana.nothing_more()
    assert await room_rev() == 2 and (await message_row(seq))["version"] == 2


async def test_an_edit_waits_for_nothing_of_another_users_bad_edit(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    seq = await posted(ana)
    await bob.send("message.edit", {"room": "lobby", "seq": seq, "body": "\ud800"})
    bad = await bob.call("message.edit", {"room": "lobby", "seq": seq, "body": {"deep": [[[]]]}})
    good = await ana.call("message.edit", {"room": "lobby", "seq": seq, "body": "fine"})
    assert bad["error"]["code"] == "invalid" and good["ok"]
    assert (await message_row(seq))["body"] == "fine"


def test_prune_edit_history_clears_old_bodies_and_keeps_the_versions(django_user_model, settings):
    from datetime import timedelta

    from django.core.management import call_command
    from django.utils import timezone

    from .conftest import apply_command

    settings.MESSAGING = {**settings.MESSAGING, "EDIT_HISTORY_RETENTION": 3600}
    ana = django_user_model.objects.create_user(username="ana")
    apply_command(ana, "room.join", {"room": "lobby"})
    apply_command(ana, "room.post", {"room": "lobby", "body": "old"})
    apply_command(ana, "message.edit", {"room": "lobby", "seq": 1, "body": "newer"})
    apply_command(ana, "message.edit", {"room": "lobby", "seq": 1, "body": "newest"})
    MessageVersion.objects.filter(version=2).update(at=timezone.now() - timedelta(hours=2))
    call_command("prune_edit_history")
    assert list(MessageVersion.objects.order_by("version").values_list("version", "previous_body")) == [
        (2, None),
        (3, "newer"),
    ]
    settings.MESSAGING = {**settings.MESSAGING, "EDIT_HISTORY_RETENTION": 0}
    call_command("prune_edit_history")
    assert list(MessageVersion.objects.values_list("previous_body", flat=True)) == [None, None]
    assert Message.objects.get(seq=1).body == "newest"


def test_an_edit_locks_its_message_row_and_leaves_its_rooms_row_to_next_rev(django_user_model):
    """`locked_message` takes the message's row alone: the room's row comes
    after it (`next_rev`). Message's ordering by the room's slug joins the
    room, and a FOR NO KEY UPDATE of the join locked the room's row too,
    first, so a receipt holding the message's row and waiting for the room's
    (its events) met the edit in a deadlock."""
    import psycopg
    from django.db import connection, transaction
    from django.utils import timezone

    from messaging.chat.edits import locked_message
    from messaging.models import Room

    ana = django_user_model.objects.create_user(username="ana")
    room = Room.objects.create(slug="lobby", last_seq=1)
    Message.objects.create(room=room, seq=1, sender=ana, client_msg_id="m1", body="x", sent_at=timezone.now())
    url = {
        k: v
        for k, v in connection.get_connection_params().items()
        if k in ("host", "port", "user", "dbname", "password")
    }
    with transaction.atomic():
        locked_message(room, 1)
        with psycopg.connect(**url, autocommit=True) as other:
            other.execute("SELECT id FROM messaging_room WHERE id = %s FOR NO KEY UPDATE NOWAIT", [room.pk])
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("SELECT id FROM messaging_message WHERE room_id = %s FOR NO KEY UPDATE NOWAIT", [room.pk])
