"""PROTOCOL.md "Message states" and the `receipt` command, on real PostgreSQL and Redis."""

from __future__ import annotations

import threading

import pytest
from channels.db import database_sync_to_async
from django.db import connection, transaction

from messaging.chat.receipts import recipient_receipts
from messaging.core.exceptions import Invalid
from messaging.core.protocol import format_time
from messaging.models import Membership, Message, WatermarkMove

from .conftest import apply_command, wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]


def message_states(room: str) -> dict[int, str]:
    return dict(Message.objects.filter(room__slug=room).values_list("seq", "state"))


states = database_sync_to_async(message_states)


def membership_marks(room: str) -> dict[int, tuple[int, int]]:
    rows = Membership.objects.filter(room__slug=room).values_list("user_id", "delivered", "read")
    return {user: (delivered, read) for user, delivered, read in rows}


marks = database_sync_to_async(membership_marks)


async def post(client, room: str, body: str = "hi") -> int:
    ack = await client.call("room.post", {"room": room, "body": body})
    assert ack["ok"], ack
    return ack["d"]["seq"]


async def receipt(client, room: str, **given) -> dict:
    ack = await client.call("receipt", {"room": room, **given})
    assert ack["ok"], ack
    return ack["d"]


async def test_states_follow_the_recipients_rule_with_a_late_joiner(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    await post(ana, "lobby")  # 1 and 2: bob is the only recipient
    await post(ana, "lobby")
    cat = await open_clients(await make_user("cat"))
    await cat.join("lobby")
    await post(ana, "lobby")  # 3: bob and cat
    await post(bob, "lobby")  # 4: ana and cat

    await receipt(bob, "lobby", delivered=4)
    assert await states("lobby") == {1: "delivered", 2: "delivered", 3: "sent", 4: "sent"}
    await receipt(cat, "lobby", delivered=3)
    assert await states("lobby") == {1: "delivered", 2: "delivered", 3: "delivered", 4: "sent"}
    await receipt(ana, "lobby", read=4)  # the sender of 1-3 reading changes none of them
    assert await states("lobby") == {1: "delivered", 2: "delivered", 3: "delivered", 4: "sent"}
    await receipt(cat, "lobby", read=4)  # 4 goes straight to read; 3 still waits for bob
    assert await states("lobby") == {1: "delivered", 2: "delivered", 3: "delivered", 4: "read"}
    await receipt(bob, "lobby", read=2)
    assert await states("lobby") == {1: "read", 2: "read", 3: "delivered", 4: "read"}
    assert await receipt(bob, "lobby", delivered=1, read=1) == {"room": "lobby", "delivered": 4, "read": 2}
    assert await states("lobby") == {1: "read", 2: "read", 3: "delivered", 4: "read"}, "never backwards"
    await receipt(bob, "lobby", read=3)
    assert await states("lobby") == {1: "read", 2: "read", 3: "read", 4: "read"}

    def times():
        messages = {m.seq: m for m in Message.objects.filter(room__slug="lobby")}
        return messages, {seq: recipient_receipts(m) for seq, m in messages.items()}

    messages, recipients = await database_sync_to_async(times)()
    assert {seq: [r.user.first_name for r in rs] for seq, rs in recipients.items()} == {
        1: ["bob"],
        2: ["bob"],
        3: ["bob", "cat"],
        4: ["ana", "cat"],
    }
    for seq, message in messages.items():
        # A state is reached when its last recipient reached it, at that very move.
        assert message.delivered_at == max(r.delivered_at for r in recipients[seq])
        assert message.read_at == max(r.read_at for r in recipients[seq])
        assert message.sent_at <= message.delivered_at <= message.read_at
    assert messages[4].delivered_at == messages[4].read_at, "cat's read=4 delivered and read it at once"


def state_times(room: str) -> dict[int, tuple[str | None, str | None]]:
    rows = Message.objects.filter(room__slug=room).values_list("seq", "delivered_at", "read_at")
    return {seq: (delivered and format_time(delivered), read and format_time(read)) for seq, delivered, read in rows}


async def test_every_move_is_broadcast_as_status_and_each_moved_message_told_to_its_sender(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    await post(ana, "lobby")
    await post(ana, "lobby")
    await ana.frames("msg", 2)
    await bob.frames("msg", 2)

    assert await receipt(bob, "lobby", delivered=2) == {"room": "lobby", "delivered": 2, "read": 0}
    expected = {"t": "status", "d": {"room": "lobby", "user": bob.user.pk, "delivered": 2, "read": 0}}
    assert await ana.frames("status", 1) == [expected]
    assert await bob.frames("status", 1) == [expected], "the member's own sockets see it too"
    times = await database_sync_to_async(state_times)("lobby")
    assert await ana.frames("state", 2) == [
        {"t": "state", "d": {"room": "lobby", "seq": seq, "state": "delivered", "at": times[seq][0]}} for seq in (1, 2)
    ]

    assert await receipt(bob, "lobby", delivered=1) == {"room": "lobby", "delivered": 2, "read": 0}
    assert await receipt(bob, "lobby", delivered=2) == {"room": "lobby", "delivered": 2, "read": 0}
    assert await ana.nothing_more() and await bob.nothing_more()

    assert await receipt(bob, "lobby", read=1) == {"room": "lobby", "delivered": 2, "read": 1}
    assert (await ana.frames("status", 1))[0]["d"] == {"room": "lobby", "user": bob.user.pk, "delivered": 2, "read": 1}
    times = await database_sync_to_async(state_times)("lobby")
    assert await ana.frames("state", 1) == [
        {"t": "state", "d": {"room": "lobby", "seq": 1, "state": "read", "at": times[1][1]}}
    ]
    await bob.frames("status", 1)
    assert await ana.nothing_more() and await bob.nothing_more(), "the reader hears no state of others' messages"
    count = await database_sync_to_async(WatermarkMove.objects.filter(membership__user=bob.user).count)()
    assert count == 2, "one recorded move per broadcast"


@pytest.mark.parametrize(
    "d, code",
    [
        ({"delivered": 3}, "invalid"),
        ({"read": 3}, "invalid"),
        ({"delivered": 1, "read": 3}, "invalid"),  # the valid half is not applied either
        ({"delivered": 3, "read": 1}, "invalid"),
        ({}, "invalid"),
        ({"delivered": None, "read": None}, "invalid"),
        ({"delivered": -1}, "invalid"),
        ({"delivered": True}, "invalid"),
        ({"delivered": 1.5}, "invalid"),
        ({"read": "2"}, "invalid"),
        ({"room": "Lobby", "delivered": 1}, "invalid"),
        ({"room": "elsewhere", "delivered": 1}, "forbidden"),
    ],
)
async def test_bad_receipts_are_refused_and_change_nothing(make_user, open_clients, d, code):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    await post(ana, "lobby")
    await post(ana, "lobby")
    await receipt(bob, "lobby", delivered=1)
    await ana.frames("msg", 2)
    await ana.frames("status", 1)
    await ana.frames("state", 1)
    before = (await marks("lobby"), await states("lobby"))

    ack = await bob.call("receipt", {"room": "lobby", **d})
    assert ack["ok"] is False and ack["error"]["code"] == code and ack["error"]["retry"] is False, ack
    assert ack["error"]["message"]
    assert (await marks("lobby"), await states("lobby")) == before
    assert await ana.nothing_more(), "no status and no state for a refused receipt"
    assert await database_sync_to_async(WatermarkMove.objects.count)() == 1


async def test_a_receipt_from_a_non_member_is_forbidden(make_user, open_clients):
    ana, eve = await open_clients(await make_user("ana")), await open_clients(await make_user("eve"))
    await ana.join("lobby")
    await post(ana, "lobby")
    ack = await eve.call("receipt", {"room": "lobby", "delivered": 1})
    assert ack["error"]["code"] == "forbidden"
    assert await states("lobby") == {1: "sent"}


async def test_join_ack_lists_members_with_their_watermarks_after_a_reconnect(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    for _ in range(3):
        await post(ana, "lobby")
    await receipt(bob, "lobby", delivered=3, read=2)
    await receipt(ana, "lobby", read=1)
    await bob.close()

    again = await open_clients(bob.user)
    ack = await again.join("lobby", since=3)
    assert ack["d"] == {
        "room": "lobby",
        "last_seq": 3,
        "last_rev": 3,
        "unread": 1,
        "first_unread": 3,
        "members": [
            {"user": ana.user.pk, "name": "ana", "delivered": 1, "read": 1, "joined_seq": 0, "online": True},
            {"user": bob.user.pk, "name": "bob", "delivered": 3, "read": 2, "joined_seq": 0, "online": True},
        ],
        "members_total": 2,
        "replayed": 0,
        "private": False,
        "owner": None,
    }


# Races, made deterministic: one transaction is held open in a thread while
# another runs, and PostgreSQL itself says when the second one is blocked.


def blocked_on_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


class Held(threading.Thread):
    """Runs `work` in a transaction on its own connection and keeps it open until `release()`.

    Used as a context manager, so a failing test never leaves it holding locks.
    """

    def __init__(self, work) -> None:
        super().__init__(daemon=True)
        self.work, self.error = work, None
        self.holding, self.released = threading.Event(), threading.Event()

    def run(self) -> None:
        try:
            with transaction.atomic():
                self.work()
                self.holding.set()
                self.released.wait(timeout=60)
        except BaseException as exc:  # surfaced by release()
            self.error = exc
        finally:
            self.holding.set()
            connection.close()

    def __enter__(self) -> Held:
        self.start()
        self.holding.wait()
        return self

    def __exit__(self, *exc_info) -> None:
        self.released.set()
        self.join(timeout=60)

    def release(self) -> None:
        self.__exit__()
        assert not self.is_alive() and self.error is None, self.error


class Background(threading.Thread):
    """Runs `work` on its own connection; `pid` is its PostgreSQL backend."""

    def __init__(self, work) -> None:
        super().__init__(daemon=True)
        self.work, self.error, self.pid = work, None, None
        self.started_db = threading.Event()

    def run(self) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.pid = cursor.fetchone()[0]
            self.started_db.set()
            self.work()
        except BaseException as exc:
            self.error = exc
        finally:
            self.started_db.set()
            connection.close()

    def blocked_or_done(self) -> bool:
        return not self.is_alive() or blocked_on_a_lock(self.pid)

    def finish(self) -> None:
        self.join(timeout=60)
        assert not self.is_alive() and self.error is None, self.error


def test_concurrent_receipts_of_the_last_two_recipients_move_the_message(django_user_model):
    ana, bob, cat = (django_user_model.objects.create_user(username=n, first_name=n) for n in ("ana", "bob", "cat"))
    for user in (ana, bob, cat):
        apply_command(user, "room.join", {"room": "lobby"})
    apply_command(ana, "room.post", {"room": "lobby", "body": "hi"})

    with Held(lambda: apply_command(bob, "receipt", {"room": "lobby", "delivered": 1})) as first:
        second = Background(lambda: apply_command(cat, "receipt", {"room": "lobby", "delivered": 1}))
        second.start()
        second.started_db.wait()
        # Without serialization the second would finish now, not seeing bob's
        # uncommitted receipt, and bob's would not see cat's: nobody moves 1.
        wait_until(second.blocked_or_done, what="the second receipt to block or finish")
        first.release()
    second.finish()
    assert message_states("lobby") == {1: "delivered"}


def test_a_join_racing_a_post_is_counted_before_any_receipt_moves_the_post(django_user_model):
    ana, bob, cat = (django_user_model.objects.create_user(username=n, first_name=n) for n in ("ana", "bob", "cat"))
    for user in (ana, bob):
        apply_command(user, "room.join", {"room": "lobby"})
    apply_command(ana, "room.post", {"room": "lobby", "body": "one"})

    with Held(lambda: apply_command(cat, "room.join", {"room": "lobby"})) as joining:
        posting = Background(lambda: apply_command(ana, "room.post", {"room": "lobby", "body": "two"}))
        posting.start()
        posting.started_db.wait()
        wait_until(posting.blocked_or_done, what="the post to block or finish")
        # Were the post through already, bob's receipt would move 2 to delivered
        # while cat, a recipient of 2 once its join commits, has not seen it.
        try:
            apply_command(bob, "receipt", {"room": "lobby", "delivered": 2})
        except Invalid:
            pass  # 2 is not posted yet: the post waits for the join
        joining.release()
    posting.finish()
    apply_command(bob, "receipt", {"room": "lobby", "delivered": 2})

    cat_joined = Membership.objects.get(user=cat).joined_seq
    assert cat_joined == 1
    assert message_states("lobby") == {1: "delivered", 2: "sent"}, "2 waits for cat"
    apply_command(cat, "receipt", {"room": "lobby", "delivered": 2})
    assert message_states("lobby") == {1: "delivered", 2: "delivered"}
