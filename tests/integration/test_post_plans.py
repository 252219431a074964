"""The posts' statement costs what its batch holds, not what the deployment holds.

A batch of posts is one prepared statement, which PostgreSQL plans once per
connection for any parameters (a generic plan, after five custom ones): its
plan must look its rooms up by slug however many rooms there are. Planned as
if the batch held 100 posts (the estimate of `jsonb_array_elements` of any
array), it hashed the whole room table instead, in every batch: on 10,000
rooms a batch of one post took 3.5 ms instead of 1.0.
"""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection

from bench.seed import seed_rooms
from messaging.chat import posts
from messaging.models import Room

from .conftest import apply_command, database_conninfo, post_delivery

pytestmark = [pytest.mark.django_db(transaction=True)]

ROOMS = 10_000
MEMBERS = 5


def generic_plan(sql: str, params: dict) -> dict:
    """The plan PostgreSQL keeps for `sql` once it plans it for any parameters."""
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", sql)))
    numbered = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m.group(1)) + 1}", sql)
    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        try:
            cursor.execute(f"PREPARE posts_plan AS {numbered}")
            values = ", ".join(["%s"] * len(names))
            cursor.execute(f"EXPLAIN (FORMAT JSON) EXECUTE posts_plan({values})", [params[n] for n in names])
            [(plan,)] = cursor.fetchall()
        finally:
            cursor.execute("DEALLOCATE ALL")
            cursor.execute("RESET plan_cache_mode")
    return (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]


def nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


@pytest.fixture
def many_rooms(django_user_model):
    """A user in two rooms, among ROOMS rooms of MEMBERS members each (the bench's `--rooms`), analyzed."""
    user = django_user_model.objects.create_user(username="many-rooms")
    for room in ("a", "b"):
        apply_command(user, "room.join", {"room": room})
    seed_rooms(database_conninfo(), ROOMS, MEMBERS)
    return user


def statement_of(deliveries) -> tuple[str, dict]:
    return posts.posts_statement([(d.context_for(), d.data, d.fingerprint) for d in deliveries])


@pytest.mark.parametrize("posts", [1, 32])
def test_a_batch_looks_its_rooms_up_by_slug_among_10000(many_rooms, posts):
    deliveries = [post_delivery(many_rooms, "ab"[i % 2], f"post {i}") for i in range(posts)]
    sql, params = statement_of(deliveries)
    plan = generic_plan(sql, params)
    scanned = [
        node
        for node in nodes(plan)
        if node["Node Type"] == "Seq Scan" and node.get("Relation Name") == Room._meta.db_table
    ]
    assert not scanned, f"the room table scanned whole: {scanned}"


def test_the_count_is_the_batchs_posts(django_user_model):
    """The count that sets the planner's estimate is the array's length: no post is left out."""
    user = django_user_model.objects.create_user(username="counted")
    deliveries = [post_delivery(user, "ab"[i % 2], f"post {i}") for i in range(5)]
    _, params = statement_of(deliveries)
    assert params["count"] == len(json.loads(params["items"])) == 5
