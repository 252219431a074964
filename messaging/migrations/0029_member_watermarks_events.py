"""`messaging_move_watermarks_v4` also writes a `member.watermarks` event for each move in a room
shared with another deployment (a `PeerRoom` row: messaging/federation).

Federation pushes a shared room's changes to its peers from the outbox
(docs/FEDERATION.md); a member's watermarks are one of them, so the move
commits its event as a post commits its own, after the move's
`message.state` events, in the same place in the room's order. Only in
shared rooms: a receipt elsewhere writes what it wrote before, so the
function keeps its name and arguments, and a process of the version before
it, during a rolling deploy, calls it unchanged (as 0019 changed it in
place). The function's SQL is `sql/0029_move_watermarks_v4.sql`, 0019's
with the event added; `CREATE OR REPLACE` drops the function's settings,
so 0017's generic plans are set again. Going back restores 0019's.
"""

import importlib

from django.db import migrations

from . import _sql

GENERIC_PLANS = importlib.import_module("messaging.migrations.0017_move_watermarks_v4_generic_plans")


def define(apps, schema_editor, name: str) -> None:
    _sql.define(apps, schema_editor, name)
    GENERIC_PLANS.generic_plans(apps, schema_editor)


def with_member_events(apps, schema_editor) -> None:
    define(apps, schema_editor, "0029_move_watermarks_v4")


def without(apps, schema_editor) -> None:
    define(apps, schema_editor, "0019_move_watermarks_v4")


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0028_federation"),
    ]

    operations = [migrations.RunPython(with_member_events, without)]
