"""Issue 26's receipts: several in one call of `messaging_move_watermarks_v4`
(migration 0016), and state updates whose cost does not grow with the room.

On real PostgreSQL: a batch answers each receipt alone; it takes the rooms'
locks in room id order whatever order the receipts came in, and the rooms'
rows (for the events) after every message row; in a room of 300
members a message moves exactly when its last recipient's watermark reaches
it (both forms); and the plan of each state UPDATE reads the room's members
by the new indexes, once per statement, never per message.
"""

from __future__ import annotations

import threading

import pytest
from django.db import OperationalError, connection, connections, transaction
from django.utils import timezone

from messaging.chat.edits import locked_message
from messaging.chat.receipts import RECEIPTS_LOCK, move_watermarks_portably
from messaging.chat.revs import next_rev
from messaging.models import Event, Membership, Message, Room, WatermarkMove

from .conftest import apply_command, move_by_function, moves_by_function, wait_until

pytestmark = [pytest.mark.django_db]

# pg_locks is the whole server's: only the locks of this test database's
# sessions (another database's receipts, a bench beside the suite, take the same advisory keys).
OURS = "pid IN (SELECT pid FROM pg_stat_activity WHERE datname = current_database())"


def room_with(slug: str, members: list, messages: list, joined: dict | None = None) -> Room:
    """A room of `members` (each joined at seq 0 unless `joined` says), with one message per sender in `messages`."""
    room = Room.objects.create(slug=slug, last_seq=len(messages))
    Membership.objects.bulk_create(
        Membership(room=room, user=user, joined_seq=(joined or {}).get(user.pk, 0)) for user in members
    )
    now = timezone.now()
    Message.objects.bulk_create(
        Message(room=room, seq=seq, sender=sender, client_msg_id=f"{slug}-{seq}", body="x", sent_at=now)
        for seq, sender in enumerate(messages, start=1)
    )
    return room


def states(room: Room) -> dict[int, str]:
    return dict(Message.objects.filter(room=room).values_list("seq", "state"))


def marks(room: Room) -> dict:
    return {m.user_id: (m.delivered, m.read) for m in Membership.objects.filter(room=room)}


def people(django_user_model, *names: str) -> list:
    return [django_user_model.objects.create_user(username=name) for name in names]


def one_waits_for_the_other(hold, wait, what: str) -> list[BaseException]:
    """`hold(held, go_on)` takes its locks in a transaction of its own thread,
    sets `held` and waits for `go_on`; then `wait()`, in another thread, must
    come to wait for one of its rows. Both are let go once it does (or the
    wait fails); returns what either raised."""
    held, go_on = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def run(body, *args) -> None:
        try:
            body(*args)
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)
        finally:
            held.set()
            connections.close_all()

    holder = threading.Thread(target=run, args=(hold, held, go_on))
    holder.start()
    assert held.wait(30)
    waiter = threading.Thread(target=run, args=(wait,))
    waiter.start()

    def waiting_for_a_row() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted AND {OURS}")
            return cursor.fetchone()[0] == 1

    try:
        wait_until(waiting_for_a_row, what=what)
    finally:
        go_on.set()
        holder.join(30)
        waiter.join(30)
    return failures


def test_a_batch_answers_each_receipt_alone_and_a_refusal_changes_nothing_else(django_user_model):
    ana, bob, cat = people(django_user_model, "ana", "bob", "cat")
    first = room_with("first", [ana, bob], [ana, ana])
    second = room_with("second", [ana, bob], [bob])
    moves = moves_by_function(
        [
            (bob, "second", None, None),  # nothing given: no move
            (cat, "first", 1, None),  # not a member
            (bob, "first", 1, None),
            (ana, "second", 1, 1),
            (bob, "first", 3, None),  # beyond the last seq
            (ana, "nowhere", 1, None),  # no such room
            (bob, "first", 2, 2),  # after its own earlier receipt of the batch
        ]
    )
    assert [type(m).__name__ for m in moves] == ["Move", "Forbidden", "Move", "Move", "Invalid", "Forbidden", "Move"]
    assert not moves[0].moved
    assert [(m.seq, m.state) for m in moves[2].messages] == [(1, "delivered")]
    assert [(m.seq, m.state) for m in moves[3].messages] == [(1, "delivered"), (1, "read")]
    assert [(m.seq, m.state) for m in moves[6].messages] == [(2, "delivered"), (1, "read"), (2, "read")]
    assert (moves[6].watermarks.delivered, moves[6].watermarks.read) == (2, 2)
    assert states(first) == {1: "read", 2: "read"} and states(second) == {1: "read"}
    assert marks(first) == {ana.pk: (0, 0), bob.pk: (2, 2)}
    assert not Membership.objects.filter(user=cat).exists()
    assert WatermarkMove.objects.count() == 3, "one move per receipt that moved, none for a refusal"


@pytest.mark.django_db(transaction=True)
def test_a_batch_takes_its_rooms_locks_in_room_id_order_whatever_order_it_was_given(django_user_model):
    """Two batches cannot deadlock: each waits for the lowest room it needs first.

    A transaction holds the first room's lock; a batch given the second room's
    receipt first must wait for the first room without holding the second's.
    """
    ana, bob = people(django_user_model, "ana", "bob")
    low = room_with("low", [ana, bob], [ana])
    high = room_with("high", [ana, bob], [ana])
    assert low.pk < high.pk
    holding, done = threading.Event(), threading.Event()
    release = threading.Event()
    failures: list[BaseException] = []

    def hold_low() -> None:
        try:
            with transaction.atomic():
                move_by_function(bob, "low", 1, None)
                holding.set()
                release.wait(30)
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)
        finally:
            holding.set()
            connections.close_all()

    def batch() -> None:
        try:
            moves_by_function([(bob, "high", 1, None), (bob, "low", 1, 1)])
        except BaseException as exc:
            failures.append(exc)
        finally:
            done.set()
            connections.close_all()

    holder = threading.Thread(target=hold_low)
    holder.start()
    assert holding.wait(30)
    runner = threading.Thread(target=batch)
    runner.start()

    def waiting_for_a_lock() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND {OURS}")
            return cursor.fetchone()[0] == 1

    try:
        wait_until(waiting_for_a_lock, what="the batch waiting for the first room's lock")
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT objid, granted FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND {OURS}",
                [RECEIPTS_LOCK],
            )
            locks = sorted(cursor.fetchall())
        assert locks == sorted([(low.pk, True), (low.pk, False)]), "the second room's lock is not held while waiting"
    finally:
        release.set()
        holder.join(30)
        runner.join(30)
    assert not failures, failures
    assert done.is_set()
    assert states(low) == {1: "read"} and states(high) == {1: "delivered"}


@pytest.mark.django_db(transaction=True)
def test_a_batch_takes_its_rooms_rows_for_the_events_after_every_message_row(django_user_model):
    """An edit takes its message's row, then its room's (the rev). A batch whose
    first receipt moved a message, and whose second waits for the edited one,
    must not hold the room's row meanwhile: the two would deadlock."""
    ana, bob = people(django_user_model, "ana", "bob")
    room = room_with("edits", [ana, bob], [ana, ana])

    def edit(held, go_on) -> None:
        with transaction.atomic():
            locked_message(room, 2)  # as message.edit and message.delete take them
            held.set()
            go_on.wait(30)
            next_rev(room.pk)

    def batch() -> None:
        moves_by_function([(bob, "edits", 1, None), (bob, "edits", 2, None)])

    failures = one_waits_for_the_other(edit, batch, "the batch waiting for the edited message's row")
    assert not failures, failures
    assert states(room) == {1: "delivered", 2: "delivered"}
    events = Event.objects.filter(room_id=room.pk, type="message.state").order_by("position")
    assert [(e.data["seq"], e.data["state"]) for e in events] == [(1, "delivered"), (2, "delivered")]


@pytest.mark.django_db(transaction=True)
def test_an_owner_leaving_locks_the_membership_before_the_room_as_a_batch_of_receipts_does(django_user_model):
    """A batch of receipts locks its senders' memberships, then the rooms' rows.
    The owner's `room.leave` beside it must wait for the membership without
    holding the room's row, or each would wait for the other (a deadlock
    PostgreSQL breaks after `deadlock_timeout` by failing one of them)."""
    ana, bob = people(django_user_model, "ana", "bob")
    room = room_with("owned", [ana, bob], [bob])
    Room.objects.filter(pk=room.pk).update(owner=ana)
    room_row_free: list[bool] = []

    def receipts(held, go_on) -> None:
        with transaction.atomic():
            Membership.objects.select_for_update().filter(room=room, user=ana).first()
            held.set()
            go_on.wait(30)
            # The rooms' rows come last in the batch: free unless the leave took it.
            with connection.cursor() as cursor:
                cursor.execute("SAVEPOINT probe")
                try:
                    cursor.execute("SELECT id FROM messaging_room WHERE id = %s FOR UPDATE NOWAIT", [room.pk])
                    room_row_free.append(True)
                except OperationalError:
                    cursor.execute("ROLLBACK TO SAVEPOINT probe")
                    room_row_free.append(False)

    def leave() -> None:
        apply_command(ana, "room.leave", {"room": "owned"})

    failures = one_waits_for_the_other(receipts, leave, "the leave waiting for the owner's membership row")
    assert not failures, failures
    assert room_row_free == [True], "the leave held the room's row while it waited for the membership"
    room.refresh_from_db()
    assert room.owner_id is None
    assert not Membership.objects.filter(room=room, user=ana).exists()
    assert Membership.objects.filter(room=room, user=bob).exists()


BIG = 300


@pytest.mark.parametrize("move", [move_by_function, move_watermarks_portably], ids=["function", "orm"])
def test_in_a_room_of_300_a_message_moves_exactly_when_its_last_recipient_reaches_it(django_user_model, move):
    users = django_user_model.objects.bulk_create(django_user_model(username=f"big{n}") for n in range(BIG + 1))
    sender, late = users[0], users[BIG]
    # Messages 1 and 2 by the sender; the last member joined after them: no recipient, it never blocks them.
    room = room_with("big", users, [sender, sender], joined={late.pk: 2})
    recipients = users[1:BIG]
    last = recipients[137]
    for user in recipients:
        if user is not last:
            move(user, "big", None, 2)
            assert states(room) == {1: "sent", 2: "sent"}, "a recipient has not reached them yet"
    move(last, "big", 1, None)
    assert states(room) == {1: "delivered", 2: "sent"}
    moved = move(last, "big", None, 2)
    assert [(m.seq, m.state) for m in moved.messages] == [(2, "delivered"), (1, "read"), (2, "read")]
    assert states(room) == {1: "read", 2: "read"}
    # The sender's own receipt moves nothing of its own messages, and nothing back.
    move(sender, "big", None, 2)
    assert states(room) == {1: "read", 2: "read"}


def state_update_plans(user, room: str, delivered, read) -> list[str]:
    """The plans of the state UPDATEs of one call of the function, as auto_explain tells them."""
    notices: list[str] = []
    with connection.cursor() as cursor:
        cursor.execute("LOAD 'auto_explain'")
        cursor.execute("SET LOCAL auto_explain.log_min_duration = 0")
        cursor.execute("SET LOCAL auto_explain.log_nested_statements = on")
        cursor.execute("SET LOCAL auto_explain.log_level = notice")
    connection.connection.add_notice_handler(lambda d: notices.append(d.message_primary))
    try:
        move_by_function(user, room, delivered, read)
    finally:
        connection.connection._notice_handlers.clear()
    return [plan for plan in notices if 'UPDATE "messaging_message"' in plan]


def test_each_state_update_reads_the_members_by_index_once_not_per_message(django_user_model):
    users = django_user_model.objects.bulk_create(django_user_model(username=f"plan{n}") for n in range(BIG))
    sender = users[0]
    room = room_with("plan", users, [sender] * 20)
    Membership.objects.filter(room=room).exclude(user=users[1]).update(delivered=20, read=20)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE messaging_membership")
        cursor.execute("ANALYZE messaging_message")
    plans = state_update_plans(users[1], "plan", 20, 20)
    assert len(plans) == 2, plans
    for plan, index in zip(plans, ["messaging_member_eff_delivered", "messaging_member_eff_read"]):
        # Every look at the room's members is an InitPlan (uncorrelated: once
        # per statement), by the effective watermark's index; no SubPlan (per
        # row) and no join with them.
        assert "SubPlan" not in plan and "Join" not in plan, plan
        assert "InitPlan" in plan and index in plan, plan
        assert "messaging_member_joined" in plan, plan
    assert states(room) == {seq: "read" for seq in range(1, 21)}


def test_the_function_plans_its_statements_generically():
    # A custom plan made from a new room's stale statistics read its messages by
    # (room_id, posted_rev) and filtered them on seq: migration 0017.
    with connection.cursor() as cursor:
        cursor.execute("SELECT proconfig FROM pg_proc WHERE proname = 'messaging_move_watermarks_v4'")
        [(config,)] = cursor.fetchall()
    assert "plan_cache_mode=force_generic_plan" in config
