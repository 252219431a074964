"""The bench's other people's rooms (`--rooms`): as many as asked, each with its own members, none of the bench's."""
from __future__ import annotations

import pytest
from django.db import connection
from psycopg.conninfo import make_conninfo

from bench.seed import SEED, seed_rooms
from messaging.models import Membership, Room

pytestmark = [pytest.mark.django_db(transaction=True)]


def database_url() -> str:
    """The test database, as the bench is given its own (a libpq connection string)."""
    params = connection.get_connection_params()
    keys = ("dbname", "user", "password", "host", "port")
    return make_conninfo(**{key: params[key] for key in keys if params.get(key)})


def test_n_rooms_of_m_members_each(django_user_model):
    bench_user = django_user_model.objects.create_user(username="bench-socket")
    seed_rooms(database_url(), 50, 3)
    rooms = Room.objects.filter(slug__startswith=SEED)
    assert rooms.count() == 50
    members = Membership.objects.filter(room__in=rooms)
    assert members.count() == 150
    assert {m.room_id for m in members} == {r.id for r in rooms}
    assert len({frozenset(members.filter(room=r).values_list("user_id", flat=True)) for r in rooms}) > 1
    assert not members.filter(user=bench_user).exists()
    assert all(username.startswith(SEED) for username in members.values_list("user__username", flat=True))


def test_none_asked_none_made():
    seed_rooms(database_url(), 0, 10)
    assert not Room.objects.exists()
