"""The database functions' SQL, one file per migration that defines one (`sql/<migration>.sql`).

A migration keeps a function as it was at its point of the schema's
history, so a file here is never edited once released: a new version of a
function is a new file, named after the migration that loads it (the way
procrastinate keeps its schema in SQL files). The files hold the app's table
names and the host's user id type as `{membership}`, `{room}`, `{message}`,
`{move}`, `{event}`, `{peerroom}`, `{user_id}`, and the receipts' advisory lock's first key
as `{lock}`; `define` fills them in from the migration's historical models.

Django's migration loader skips modules whose name starts with an underscore,
so this one is not taken for a migration.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

# The first key of a room's advisory lock: `messaging.chat.receipts.RECEIPTS_LOCK`.
RECEIPTS_LOCK = 0x72637074


def function_sql(name: str) -> str:
    """The text of `sql/<name>.sql`."""
    return resources.files(__package__).joinpath("sql", f"{name}.sql").read_text(encoding="utf-8")


def user_id_type(apps: Any, schema_editor: Any) -> str:
    """The host's user id type (integer, bigint, uuid...), as the membership stores it."""
    membership = apps.get_model("messaging", "Membership")
    return membership._meta.get_field("user").db_type(schema_editor.connection)


def define(apps: Any, schema_editor: Any, name: str) -> None:
    """Run `sql/<name>.sql` on PostgreSQL (the functions exist there only), its names filled in."""
    if schema_editor.connection.vendor != "postgresql":
        return
    tables = {
        "membership": "Membership",
        "room": "Room",
        "message": "Message",
        "move": "WatermarkMove",
        "event": "Event",
        "peerroom": "PeerRoom",
    }
    names = {}
    for key, model in tables.items():
        try:
            names[key] = schema_editor.quote_name(apps.get_model("messaging", model)._meta.db_table)
        except LookupError:  # a table that does not exist yet at this point of the history
            continue
    schema_editor.execute(
        function_sql(name).format(user_id=user_id_type(apps, schema_editor), lock=RECEIPTS_LOCK, **names)
    )


def drop(apps: Any, schema_editor: Any, signature: str) -> None:
    """Drop the function of `signature` (its `{user_id}` filled in) on PostgreSQL, if it is there."""
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP FUNCTION IF EXISTS {signature.format(user_id=user_id_type(apps, schema_editor))}")
