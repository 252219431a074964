"""`room.search` (PROTOCOL.md 1.2): an index of the words of every message's current body.

PostgreSQL: a GIN index on an expression, `to_tsvector('simple', ...)` of
the body with ASCII punctuation turned into spaces, so that words are runs
of letters and digits as SQLite's tokenizer makes them (messaging/chat/search.py
queries the same expression, or the index would not serve it). An
expression index needs no trigger: an edit's or delete's new row version
gets its entries as any index's. Built CONCURRENTLY (a migration that is
not atomic): a deployment's posts go on while it is built. Its statistics
target is 1,000 (ANALYZE then tracks the 10,000 commonest words, not 1,000):
with `room`, the planner picks between walking the room back from its
newest message (a common word) and reading the word's messages from the
index (a rarer one) by how common it thinks the word is, and a word it
took for common by a small sample sent it walking a million messages (6 s
instead of 20 ms, docs/PERFORMANCE.md).

SQLite: an FTS5 table over the messages' bodies (external content: the
words only, not a copy of the text), kept current by triggers on insert,
update of the body and delete, and built from what is there. Diacritics are
kept, as PostgreSQL's 'simple' keeps them: "café" is not "cafe" on either.
Other databases get neither; `room.search` refuses there.
"""

from django.db import migrations

# The index's expression, as messaging/chat/search.py writes it: ASCII punctuation, each to a space.
PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
DOCUMENT = "to_tsvector('simple'::regconfig, translate(body, '{}', '{}'))".format(
    PUNCTUATION.replace("'", "''"), " " * len(PUNCTUATION)
)

SQLITE = [
    "CREATE VIRTUAL TABLE messaging_message_search USING fts5("
    "body, content='messaging_message', content_rowid='id', tokenize='unicode61 remove_diacritics 0')",
    "CREATE TRIGGER messaging_message_search_insert AFTER INSERT ON messaging_message BEGIN"
    " INSERT INTO messaging_message_search (rowid, body) VALUES (new.id, new.body); END",
    "CREATE TRIGGER messaging_message_search_delete AFTER DELETE ON messaging_message BEGIN"
    " INSERT INTO messaging_message_search (messaging_message_search, rowid, body)"
    " VALUES ('delete', old.id, old.body); END",
    "CREATE TRIGGER messaging_message_search_update AFTER UPDATE OF body ON messaging_message BEGIN"
    " INSERT INTO messaging_message_search (messaging_message_search, rowid, body)"
    " VALUES ('delete', old.id, old.body);"
    " INSERT INTO messaging_message_search (rowid, body) VALUES (new.id, new.body); END",
    "INSERT INTO messaging_message_search (messaging_message_search) VALUES ('rebuild')",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS messaging_message_search_insert",
    "DROP TRIGGER IF EXISTS messaging_message_search_delete",
    "DROP TRIGGER IF EXISTS messaging_message_search_update",
    "DROP TABLE IF EXISTS messaging_message_search",
]


def create(apps, schema_editor):
    table = schema_editor.quote_name(apps.get_model("messaging", "Message")._meta.db_table)
    if schema_editor.connection.vendor == "postgresql":
        # No parameters: the expression's % is a character, not a placeholder.
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS messaging_message_search ON {table} USING gin ({DOCUMENT})",
            None,
        )
        schema_editor.execute("ALTER INDEX messaging_message_search ALTER COLUMN 1 SET STATISTICS 1000", None)
    elif schema_editor.connection.vendor == "sqlite":
        for sql in SQLITE:
            schema_editor.execute(sql, None)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX CONCURRENTLY IF EXISTS messaging_message_search")
    elif schema_editor.connection.vendor == "sqlite":
        for sql in SQLITE_DROP:
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    # CREATE INDEX CONCURRENTLY runs outside a transaction.
    atomic = False

    dependencies = [
        ("messaging", "0030_uploads"),
    ]

    operations = [migrations.RunPython(create, drop, atomic=False)]
