"""Looking for a string anywhere in the database: every text and JSON column of every table, read from
the catalogue (not a list of the app's tables), so a copy kept by any app, or by no app, is found."""

from __future__ import annotations

# information_schema's names of the types a copy of a body could be kept in, arrays of them included.
TEXT_TYPES = ("text", "character varying", "character", "json", "jsonb")
TEXT_ARRAYS = ("_text", "_varchar", "_bpchar", "_json", "_jsonb")


def text_columns() -> list[tuple[str, str, str]]:
    """(schema, table, column) of every text-like column of every base table outside PostgreSQL's own schemas."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.table_schema, c.table_name, c.column_name FROM information_schema.columns c"
            " JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name"
            " WHERE t.table_type = 'BASE TABLE' AND c.table_schema NOT IN ('pg_catalog', 'information_schema')"
            " AND (c.data_type = ANY(%s) OR c.udt_name = ANY(%s)) ORDER BY 1, 2, 3",
            [list(TEXT_TYPES), list(TEXT_ARRAYS)],
        )
        return cursor.fetchall()


def where_found(text: str) -> set[str]:
    """`table.column` of every column where some row holds `text` (a plain string: no LIKE wildcards)."""
    from django.db import connection

    quote = connection.ops.quote_name
    found = set()
    with connection.cursor() as cursor:
        for schema, table, column in text_columns():
            cursor.execute(
                f"SELECT EXISTS (SELECT FROM {quote(schema)}.{quote(table)} WHERE {quote(column)}::text LIKE %s)",
                [f"%{text}%"],
            )
            if cursor.fetchone()[0]:
                found.add(f"{table}.{column}")
    return found


def unscanned_model_columns() -> set[str]:
    """Text and JSON columns of the installed apps' models that `text_columns` would miss (none, or it reads wrong)."""
    from django.apps import apps
    from django.db import models

    scanned = {(table, column) for _, table, column in text_columns()}
    return {
        f"{model._meta.db_table}.{field.column}"
        for model in apps.get_models()
        if model._meta.managed
        for field in model._meta.concrete_fields
        if isinstance(field, (models.CharField, models.TextField, models.JSONField))
        and (model._meta.db_table, field.column) not in scanned
    }
