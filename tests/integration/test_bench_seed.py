"""The bench's other people's rooms (`--rooms`): as many as asked, each with its own members, none of the bench's."""

from __future__ import annotations

import pytest

from bench.seed import SEED, seed_rooms
from messaging.models import Membership, Room

from .conftest import database_conninfo

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_n_rooms_of_m_members_each(django_user_model):
    bench_user = django_user_model.objects.create_user(username="bench-socket")
    seed_rooms(database_conninfo(), 50, 3)
    rooms = Room.objects.filter(slug__startswith=SEED)
    assert rooms.count() == 50
    members = Membership.objects.filter(room__in=rooms)
    assert members.count() == 150
    assert {m.room_id for m in members} == {r.id for r in rooms}
    assert len({frozenset(members.filter(room=r).values_list("user_id", flat=True)) for r in rooms}) > 1
    assert not members.filter(user=bench_user).exists()
    assert all(username.startswith(SEED) for username in members.values_list("user__username", flat=True))


def test_none_asked_none_made():
    seed_rooms(database_conninfo(), 0, 10)
    assert not Room.objects.exists()
