"""The app's tables on PostgreSQL: each foreign key served by an index, and by no
redundant one; a membership's watermark moves deleted with it by the database."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection

import messaging
from messaging.models import Membership, Room

pytestmark = [pytest.mark.django_db]


def indexes(table: str) -> list[list[str]]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return [info["columns"] for info in constraints.values() if info["index"] or info["unique"]]


@pytest.mark.parametrize("model", list(apps.get_app_config("messaging").get_models()), ids=lambda m: m.__name__)
def test_every_foreign_key_leads_an_index_and_none_of_its_own_beside_a_composite_one(model):
    # Lookups by the key and the deletes that cascade to it need an index
    # that starts with it; one on the key alone beside a composite one that
    # starts with it only costs a write per insert.
    table = model._meta.db_table
    found = indexes(table)
    for field in model._meta.concrete_fields:
        if field.many_to_one or field.one_to_one:
            # An index on an expression (the search's) has no columns: it leads with none.
            leading = [columns for columns in found if columns and columns[0] == field.column]
            assert leading, f"no index starts with {table}.{field.column}"
            if len(leading) > 1:
                assert [field.column] not in leading, f"{table}.{field.column} leads {leading}"


def delete_action_of_moves_on_memberships() -> str:
    """pg_constraint's confdeltype of the watermark moves' key to memberships: 'c' cascade, 'a' no action."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT confdeltype FROM pg_constraint WHERE contype = 'f'"
            " AND conrelid = 'messaging_watermarkmove'::regclass AND confrelid = 'messaging_membership'::regclass"
        )
        (action,) = cursor.fetchall()
    return action[0]


def test_the_database_deletes_a_memberships_watermark_moves_with_it():
    assert delete_action_of_moves_on_memberships() == "c"


@pytest.mark.django_db(transaction=True)
def test_a_receipt_committed_inside_a_membership_delete_does_not_fail_it(django_user_model):
    from messaging.models import Membership, Room, WatermarkMove

    user = django_user_model.objects.create_user(username="leaver")
    membership = Membership.objects.create(user=user, room=Room.objects.create(slug="left"))
    params = {k: v for k, v in connection.get_connection_params().items() if k != "cursor_factory"}
    with psycopg.connect(**params) as deleter, psycopg.connect(**params, autocommit=True) as receipt:
        # Django's delete, step one: the membership's moves (a fast delete).
        deleter.execute("DELETE FROM messaging_watermarkmove WHERE membership_id = %s", [membership.pk])
        # A receipt locks the membership row, which that delete did not touch, and commits its move.
        with receipt.transaction():
            receipt.execute("SELECT 1 FROM messaging_membership WHERE id = %s FOR UPDATE", [membership.pk])
            receipt.execute(
                "INSERT INTO messaging_watermarkmove (membership_id, delivered, read, at) VALUES (%s, 1, 0, now())",
                [membership.pk],
            )
        # Step two: the membership. Without the cascade in the database, the
        # receipt's move failed the deferred foreign key check at this commit.
        deleter.execute("DELETE FROM messaging_membership WHERE id = %s", [membership.pk])
        deleter.commit()
    assert not Membership.objects.filter(pk=membership.pk).exists()
    assert not WatermarkMove.objects.filter(membership_id=membership.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_the_cascade_migration_goes_back_to_what_django_makes_and_forward_again():
    try:
        call_command("migrate", "messaging", "0004", verbosity=0)
        assert delete_action_of_moves_on_memberships() == "a"
    finally:
        # Every app forward: going back also unapplied the apps that depend on
        # messaging (the reactions app), which `migrate messaging` leaves behind.
        call_command("migrate", verbosity=0)
    assert delete_action_of_moves_on_memberships() == "c"


@pytest.mark.django_db(transaction=True)
def test_a_process_of_the_version_before_can_still_add_members(django_user_model):
    # During a rolling deploy, after migrate, old processes insert memberships
    # without the pruned watermarks; the database fills them in.
    from messaging.models import Membership, Room

    user = django_user_model.objects.create_user(username="old-process")
    room = Room.objects.create(slug="rolling")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO messaging_membership (room_id, user_id, joined_seq, joined_at, delivered, read)"
            " VALUES (%s, %s, 0, now(), 0, 0)",
            [room.pk, user.pk],
        )
    membership = Membership.objects.get(room=room, user=user)
    assert (membership.pruned_delivered, membership.pruned_read) == (0, 0)


def move_function_arguments(name: str = "messaging_move_watermarks") -> list[str]:
    """The input argument types of each function of this name in the database."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT oidvectortypes(proargtypes) FROM pg_proc WHERE proname = %s", [name])
        return [arguments for (arguments,) in cursor.fetchall()]


EARLIER_VERSIONS = ("messaging_move_watermarks", "messaging_move_watermarks_v2", "messaging_move_watermarks_v3")


def test_a_receipts_move_is_one_function_taking_the_hosts_user_id():
    user_id = Membership._meta.get_field("user").db_type(connection)
    assert move_function_arguments("messaging_move_watermarks_v4") == [
        f"text[], {user_id}[], bigint[], bigint[], text[], bigint, bigint, boolean"
    ]
    # Dropped by 0020, the release after the last one that called them.
    assert [name for name in EARLIER_VERSIONS if move_function_arguments(name)] == []


def membership_index_names() -> set[str]:
    with connection.cursor() as cursor:
        return set(connection.introspection.get_constraints(cursor, Membership._meta.db_table))


@pytest.mark.django_db(transaction=True)
def test_the_contract_migration_goes_back_to_every_version_and_forward_again(django_user_model):
    from .conftest import move_by_function as move_watermarks

    raw_indexes = {"messaging_membership_delivered", "messaging_membership_read"}
    try:
        call_command("migrate", "messaging", "0019", verbosity=0)
        assert [name for name in EARLIER_VERSIONS if len(move_function_arguments(name)) == 1] == list(EARLIER_VERSIONS)
        assert raw_indexes <= membership_index_names()
        call_command("migrate", "messaging", "0006", verbosity=0)
        assert [name for name in EARLIER_VERSIONS if move_function_arguments(name)] == []
    finally:
        # Every app forward: going back also unapplied the apps that depend on
        # messaging (the reactions app), which `migrate messaging` leaves behind.
        call_command("migrate", verbosity=0)
    assert [name for name in EARLIER_VERSIONS if move_function_arguments(name)] == []
    assert not raw_indexes & membership_index_names()
    user = django_user_model.objects.create_user(username="mover")
    Membership.objects.create(user=user, room=Room.objects.create(slug="again", last_seq=1))
    assert move_watermarks(user, "again", 1, None).watermarks.delivered == 1


def functions_in_the_database() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = current_schema() AND p.proname LIKE 'messaging%%'"
        )
        return {name for (name,) in cursor.fetchall()}


def functions_the_code_calls() -> set[str]:
    """Every `messaging_...(` the app's code outside its migrations names: its statements and modules."""
    root = Path(messaging.__file__).parent
    named: set[str] = set()
    for path in [*root.rglob("*.sql"), *root.rglob("*.py")]:
        if "migrations" not in path.parts:
            named |= set(re.findall(r"\b(messaging_[a-z0-9_]+)\(", path.read_text(encoding="utf-8")))
    return named


def index_definitions(schema: str) -> set[str]:
    """Every index of the schema's tables as PostgreSQL writes it, the schema's name taken out."""
    with connection.cursor() as cursor:
        # Django's own record of the migrations is no model.
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND tablename <> 'django_migrations'", [schema]
        )
        return {definition.replace(f" {schema}.", " ") for (definition,) in cursor.fetchall()}


def test_the_database_holds_only_what_the_current_code_uses():
    # Functions: exactly those the code calls.
    assert functions_in_the_database() == functions_the_code_calls() == {"messaging_move_watermarks_v4"}
    # Tables and indexes: exactly what Django makes of the current models, in a
    # schema of its own, beside what the migrations left in the test database.
    migrated = index_definitions("public")
    with connection.cursor() as cursor:
        cursor.execute("CREATE SCHEMA fresh")
        cursor.execute("SET LOCAL search_path TO fresh")
    try:
        with connection.schema_editor() as editor:
            for model in apps.get_models():
                editor.create_model(model)
        fresh = index_definitions("fresh")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL search_path TO public")
            cursor.execute("DROP SCHEMA fresh CASCADE")
    # The one index no model can declare: room.search's GIN index on an expression,
    # PostgreSQL's alone (migration 0031), on the very expression the search queries.
    searched = {definition for definition in migrated if " messaging_message_search " in definition}
    assert [d for d in searched if "gin (to_tsvector('simple'::regconfig, translate(body" in d] == list(searched)
    assert len(searched) == 1
    assert migrated - fresh - searched == set(), "indexes the migrations left that the models do not declare"
    assert fresh - migrated == set(), "indexes the models declare that the migrations did not make"
