"""On PostgreSQL, a receipt's move is one function call: one round trip.

`messaging.chat.receipts.move_watermarks` took eight (BEGIN, the membership, the
room's state lock, the watermarks, the move, one UPDATE of states per
watermark, COMMIT), and a database thread hop from the event loop. One
statement cannot do it: its snapshot is taken before it waits for the room's
state lock, so it would not see a receipt that committed in the meantime, and
two recipients' receipts would each miss the other's (see
`receipts.lock_room_states`). In a VOLATILE PL/pgSQL function each statement
takes a fresh snapshot, so the UPDATEs after the lock see every watermark
committed before it, as the separate statements did.

The function does what the ORM path in `messaging.chat.receipts` does, in the same
order and with the same locks (the membership row, then the room's advisory
lock), so processes of both versions can run side by side during a deploy.
It returns no row for a non-member. Otherwise one row: the room's last seq,
the old watermarks, and the new ones, which are NULL when a given seq is
beyond the room's last (then nothing changed).

The SQL is written here, not imported: a migration keeps the function as it
was at this point of the schema's history. A later change of it is a new
migration that replaces it.
"""
from django.db import migrations

# The first key of the room's advisory lock: `messaging.chat.receipts.RECEIPTS_LOCK`.
RECEIPTS_LOCK = 0x72637074

FUNCTION = """
CREATE OR REPLACE FUNCTION messaging_move_watermarks(
    p_room text, p_user {user_id}, p_delivered bigint, p_read bigint,
    OUT last_seq bigint, OUT old_delivered bigint, OUT old_read bigint,
    OUT new_delivered bigint, OUT new_read bigint
) RETURNS SETOF record LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    member record;
    moved_at timestamptz;
    delivered_after bigint;
    read_after bigint;
BEGIN
    SELECT m.id, m.room_id, m.joined_seq, m.delivered, m.read, r.last_seq INTO member
    FROM {membership} m JOIN {room} r ON r.id = m.room_id
    WHERE r.slug = p_room AND m.user_id = p_user
    FOR UPDATE OF m;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    last_seq := member.last_seq;
    old_delivered := member.delivered;
    old_read := member.read;
    IF coalesce(p_delivered, 0) > member.last_seq OR coalesce(p_read, 0) > member.last_seq THEN
        RETURN NEXT;
        RETURN;
    END IF;
    -- Never lower, and read implies delivered (`receipts.Watermarks.forward`).
    new_read := greatest(member.read, coalesce(p_read, 0));
    new_delivered := greatest(member.delivered, coalesce(p_delivered, 0), new_read);
    IF new_delivered = member.delivered AND new_read = member.read THEN
        RETURN NEXT;
        RETURN;
    END IF;

    PERFORM pg_advisory_xact_lock({lock}, mod(member.room_id, 2147483648)::integer);
    moved_at := clock_timestamp();
    UPDATE {membership} SET delivered = new_delivered, read = new_read WHERE id = member.id;
    INSERT INTO {move} (membership_id, delivered, read, at) VALUES (member.id, new_delivered, new_read, moved_at);

    -- A member is a recipient only of messages after it joined (`receipts.recipients`);
    -- a message moves once every recipient's watermark reached it (`receipts.advance_states`).
    delivered_after := greatest(member.delivered, member.joined_seq);
    IF new_delivered > delivered_after THEN
        UPDATE {message} g SET state = 'delivered', delivered_at = moved_at
        WHERE g.room_id = member.room_id AND g.seq > delivered_after AND g.seq <= new_delivered
          AND g.state = 'sent'
          AND EXISTS (SELECT FROM {membership} o
                      WHERE o.room_id = g.room_id AND o.joined_seq < g.seq AND o.user_id <> g.sender_id)
          AND NOT EXISTS (SELECT FROM {membership} o
                          WHERE o.room_id = g.room_id AND o.joined_seq < g.seq AND o.user_id <> g.sender_id
                            AND o.delivered < g.seq);
    END IF;
    read_after := greatest(member.read, member.joined_seq);
    IF new_read > read_after THEN
        UPDATE {message} g SET state = 'read', read_at = moved_at, delivered_at = coalesce(g.delivered_at, moved_at)
        WHERE g.room_id = member.room_id AND g.seq > read_after AND g.seq <= new_read
          AND g.state IN ('sent', 'delivered')
          AND EXISTS (SELECT FROM {membership} o
                      WHERE o.room_id = g.room_id AND o.joined_seq < g.seq AND o.user_id <> g.sender_id)
          AND NOT EXISTS (SELECT FROM {membership} o
                          WHERE o.room_id = g.room_id AND o.joined_seq < g.seq AND o.user_id <> g.sender_id
                            AND o.read < g.seq);
    END IF;
    RETURN NEXT;
END
$$
"""


def create_function(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    membership = apps.get_model("messaging", "Membership")
    quote = schema_editor.quote_name
    schema_editor.execute(FUNCTION.format(
        membership=quote(membership._meta.db_table),
        room=quote(apps.get_model("messaging", "Room")._meta.db_table),
        message=quote(apps.get_model("messaging", "Message")._meta.db_table),
        move=quote(apps.get_model("messaging", "WatermarkMove")._meta.db_table),
        # The host's user id type (integer, bigint, uuid...), as the membership stores it.
        user_id=membership._meta.get_field("user").db_type(schema_editor.connection),
        lock=RECEIPTS_LOCK,
    ))


def drop_function(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    membership = apps.get_model("messaging", "Membership")
    user_id = membership._meta.get_field("user").db_type(schema_editor.connection)
    schema_editor.execute(f"DROP FUNCTION IF EXISTS messaging_move_watermarks(text, {user_id}, bigint, bigint)")


class Migration(migrations.Migration):

    dependencies = [
        ('messaging', '0006_membership_pruned_watermarks'),
    ]

    operations = [
        migrations.RunPython(create_function, drop_function),
    ]
