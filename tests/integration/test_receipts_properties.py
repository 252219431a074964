"""Property: any order and repetition of receipts ends where their maxima, applied once, end.

Runs the real moves on PostgreSQL, both of them: the function call that
`move_watermarks_by_function` makes there (migration 0008) and the ORM's statements that
it makes on other databases. Each example builds a room in a
savepoint and rolls it back, and is checked three ways: against the same
receipts' maxima applied once, against the recipients rule computed here from
the final watermarks, and step by step for states that never move back. Each
move also says what it did (for the `state` and `status` frames): exactly the
messages whose state it changed, at the time it stored, and the room's size;
the function and the ORM's statements say the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from messaging.chat.receipts import move_watermarks_portably
from messaging.models import Membership, Message, Room

from .conftest import move_by_function

pytestmark = [pytest.mark.django_db]

RANK = {"sent": 0, "delivered": 1, "read": 2}


@dataclass(frozen=True)
class Scenario:
    joined: list[int]  # per member: the room's last seq when it joined
    senders: list[int]  # per message, seq 1..n: the sending member
    receipts: list[tuple[int, int | None, int | None]]  # (member, delivered, read), in the order applied


@st.composite
def scenarios(draw) -> Scenario:
    n = draw(st.integers(1, 8))
    members = draw(st.integers(2, 4))
    joined = [0] + [draw(st.integers(0, n - 1)) for _ in range(members - 1)]
    # A sender is a member by the time it posts.
    senders = [draw(st.sampled_from([m for m in range(members) if joined[m] < seq])) for seq in range(1, n + 1)]
    seq = st.none() | st.integers(0, n)
    receipt = st.tuples(st.integers(0, members - 1), seq, seq).filter(lambda r: r[1] is not None or r[2] is not None)
    given_receipts = draw(st.lists(receipt, min_size=1, max_size=12))
    # Any order, with repeats.
    applied = draw(st.permutations(given_receipts + draw(st.lists(st.sampled_from(given_receipts), max_size=6))))
    return Scenario(joined, senders, applied)


class Rollback(Exception):
    pass


def told(move, room) -> tuple[bool, int, list[tuple]]:
    """What a move says it did: whether it moved the watermarks, the room's
    members and the messages it moved, each as (seq, sender, state); each
    one's time is checked against the row."""
    times = {m.seq: (m.delivered_at, m.read_at) for m in Message.objects.filter(room=room)}
    for moved in move.messages:
        delivered_at, read_at = times[moved.seq]
        assert (delivered_at if moved.state == "delivered" else read_at) == move.at
    return move.moved, move.members, [(m.seq, m.sender, m.state) for m in move.messages]


def run(move, users, scenario: Scenario, receipts) -> tuple[dict, dict, list[dict], list[tuple]]:
    """Build the room, apply `receipts`, return (watermarks, states with times,
    states after each step, what each step's move said it did)."""
    try:
        with transaction.atomic():
            room = Room.objects.create(slug="prop", last_seq=len(scenario.senders))
            for member, joined_seq in enumerate(scenario.joined):
                Membership.objects.create(room=room, user=users[member], joined_seq=joined_seq)
            now = timezone.now()
            Message.objects.bulk_create(
                Message(room=room, seq=seq, sender=users[sender], client_msg_id=f"m{seq}", body="x", sent_at=now)
                for seq, sender in enumerate(scenario.senders, start=1)
            )
            steps, moves = [], []
            for member, delivered, read in receipts:
                moves.append(told(move(users[member], "prop", delivered, read), room))
                steps.append(dict(Message.objects.filter(room=room).values_list("seq", "state")))
            marks = {m.user_id: (m.delivered, m.read) for m in Membership.objects.filter(room=room)}
            states = {
                m.seq: (m.state, m.delivered_at is not None, m.read_at is not None)
                for m in Message.objects.filter(room=room)
            }
            raise Rollback((marks, states, steps, moves))
    except Rollback as done:
        return done.args[0]


def maxima(scenario: Scenario) -> list[tuple[int, int | None, int | None]]:
    once = []
    for member in sorted({r[0] for r in scenario.receipts}):
        mine = [r for r in scenario.receipts if r[0] == member]
        delivered = max((d for _, d, _ in mine if d is not None), default=None)
        read = max((r for _, _, r in mine if r is not None), default=None)
        once.append((member, delivered, read))
    return once


def expected_states(scenario: Scenario, marks: dict, users) -> dict:
    """The recipients rule, computed from the final watermarks."""
    expected = {}
    for seq, sender in enumerate(scenario.senders, start=1):
        recipients = [marks[users[m].pk] for m in range(len(users)) if m != sender and scenario.joined[m] < seq]
        if recipients and all(read >= seq for _, read in recipients):
            state = "read"
        elif recipients and all(delivered >= seq for delivered, _ in recipients):
            state = "delivered"
        else:
            state = "sent"
        expected[seq] = (state, state != "sent", state == "read")
    return expected


@pytest.fixture(params=[move_by_function, move_watermarks_portably], ids=["function", "orm"])
def move(request):
    return request.param


@pytest.fixture
def users(django_user_model):
    return [django_user_model.objects.create_user(username=f"p{i}") for i in range(4)]


@settings(
    max_examples=60,
    deadline=None,  # the machine is shared: a slow example is not a failure
    # The users are made once per test and never changed; each example rolls its rows back.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios())
def test_any_order_and_repetition_of_receipts_ends_like_their_maxima_once(move, users, scenario):
    marks, states, steps, moves = run(move, users, scenario, scenario.receipts)
    once_marks, once_states, _, _ = run(move, users, scenario, maxima(scenario))
    assert marks == once_marks
    assert states == once_states
    assert states == expected_states(scenario, marks, users[: len(scenario.joined)])
    for before, after in zip(steps, steps[1:]):
        assert all(RANK[after[seq]] >= RANK[before[seq]] for seq in before), "a state moved back"
    # Each move tells exactly the messages it moved on, with the state each reached.
    unmoved = {seq: "sent" for seq in range(1, len(scenario.senders) + 1)}
    for before, after, (watermarks_moved, members, moved) in zip([unmoved, *steps], steps, moves):
        changed = {seq: state for seq, state in after.items() if state != before[seq]}
        reached = {}
        for seq, sender, state in moved:
            assert sender == users[scenario.senders[seq - 1]].pk
            reached[seq] = max(reached.get(seq, before[seq]), state, key=RANK.get)
        assert reached == changed
        assert members == (len(scenario.joined) if watermarks_moved else 0), "counted only when it moved"


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios())
def test_the_function_and_the_orm_say_the_same_of_every_move(users, scenario):
    _, _, function_steps, function_moves = run(move_by_function, users, scenario, scenario.receipts)
    _, _, orm_steps, orm_moves = run(move_watermarks_portably, users, scenario, scenario.receipts)
    assert function_steps == orm_steps
    assert function_moves == orm_moves
