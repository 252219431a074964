"""The app's tables on PostgreSQL: each foreign key served by an index, and by no redundant one."""
from __future__ import annotations

import pytest
from django.apps import apps
from django.db import connection

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
            leading = [columns for columns in found if columns[0] == field.column]
            assert leading, f"no index starts with {table}.{field.column}"
            if len(leading) > 1:
                assert [field.column] not in leading, f"{table}.{field.column} leads {leading}"
