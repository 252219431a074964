"""The receipt's function also says what moved: `messaging_move_watermarks_v2`.

A receipt that moves messages to `delivered` or `read` tells each one's
sender with a `state` frame, and broadcasts `status` only in rooms of at most
`MEMBERS_ON_JOIN` members. The transaction knows both already: the UPDATEs
of states touch exactly the messages that moved, and the room's members are a
count away. This version returns them, still in one round trip:

- `members`: the room's members, counted up to `p_members_upto + 1` (a
  caller asks only whether the room is over that size, so a room of 8,000
  costs no more than one of 101);
- `moved_at`: the time of the move, the states' time;
- per state, the newest `p_states_limit` messages it moved, as two arrays in
  seq order: their seqs and their senders (a receipt that catches up on
  100,000 messages must not hand back 100,000 rows).

Everything else is version 1 (migration 0007), statement for statement, with
the same locks in the same order. Version 1 stays: during a rolling deploy a
process of the version before still calls it, beside processes calling this
one, and the two serialize on the same locks. A later release drops it.

The SQL is written here, not imported, as in 0007.
"""
from django.db import migrations

# The first key of the room's advisory lock: `messaging.chat.receipts.RECEIPTS_LOCK`.
RECEIPTS_LOCK = 0x72637074

FUNCTION = """
CREATE OR REPLACE FUNCTION messaging_move_watermarks_v2(
    p_room text, p_user {user_id}, p_delivered bigint, p_read bigint, p_members_upto bigint, p_states_limit bigint,
    OUT last_seq bigint, OUT old_delivered bigint, OUT old_read bigint,
    OUT new_delivered bigint, OUT new_read bigint,
    OUT members bigint, OUT moved_at timestamptz,
    OUT delivered_seqs bigint[], OUT delivered_senders {user_id}[],
    OUT read_seqs bigint[], OUT read_senders {user_id}[]
) RETURNS SETOF record LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    member record;
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
    SELECT count(*) INTO members
    FROM (SELECT FROM {membership} o WHERE o.room_id = member.room_id LIMIT p_members_upto + 1) AS counted;

    -- A member is a recipient only of messages after it joined (`receipts.recipients`);
    -- a message moves once every recipient's watermark reached it (`receipts.advance_states`).
    delivered_after := greatest(member.delivered, member.joined_seq);
    IF new_delivered > delivered_after THEN
        WITH moved AS (
            UPDATE {message} g SET state = 'delivered', delivered_at = moved_at
            WHERE g.room_id = member.room_id AND g.seq > delivered_after AND g.seq <= new_delivered
              AND g.state = 'sent'
              AND EXISTS (SELECT FROM {membership} o
                          WHERE o.room_id = g.room_id AND o.joined_seq < g.seq AND o.user_id <> g.sender_id)
              AND NOT EXISTS (SELECT FROM {membership} o
                              WHERE o.room_id = g.room_id AND o.joined_seq < g.seq AND o.user_id <> g.sender_id
                                AND o.delivered < g.seq)
            RETURNING g.seq, g.sender_id
        ), newest AS (
            SELECT moved.seq, moved.sender_id FROM moved ORDER BY moved.seq DESC LIMIT p_states_limit
        )
        SELECT array_agg(newest.seq ORDER BY newest.seq), array_agg(newest.sender_id ORDER BY newest.seq)
        INTO delivered_seqs, delivered_senders FROM newest;
    END IF;
    read_after := greatest(member.read, member.joined_seq);
    IF new_read > read_after THEN
        WITH moved AS (
            UPDATE {message} g
            SET state = 'read', read_at = moved_at, delivered_at = coalesce(g.delivered_at, moved_at)
            WHERE g.room_id = member.room_id AND g.seq > read_after AND g.seq <= new_read
              AND g.state IN ('sent', 'delivered')
              AND EXISTS (SELECT FROM {membership} o
                          WHERE o.room_id = g.room_id AND o.joined_seq < g.seq AND o.user_id <> g.sender_id)
              AND NOT EXISTS (SELECT FROM {membership} o
                              WHERE o.room_id = g.room_id AND o.joined_seq < g.seq AND o.user_id <> g.sender_id
                                AND o.read < g.seq)
            RETURNING g.seq, g.sender_id
        ), newest AS (
            SELECT moved.seq, moved.sender_id FROM moved ORDER BY moved.seq DESC LIMIT p_states_limit
        )
        SELECT array_agg(newest.seq ORDER BY newest.seq), array_agg(newest.sender_id ORDER BY newest.seq)
        INTO read_seqs, read_senders FROM newest;
    END IF;
    RETURN NEXT;
END
$$
"""


def user_id_type(apps, schema_editor) -> str:
    """The host's user id type (integer, bigint, uuid...), as the membership stores it."""
    membership = apps.get_model("messaging", "Membership")
    return membership._meta.get_field("user").db_type(schema_editor.connection)


def create_function(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    schema_editor.execute(FUNCTION.format(
        membership=quote(apps.get_model("messaging", "Membership")._meta.db_table),
        room=quote(apps.get_model("messaging", "Room")._meta.db_table),
        message=quote(apps.get_model("messaging", "Message")._meta.db_table),
        move=quote(apps.get_model("messaging", "WatermarkMove")._meta.db_table),
        user_id=user_id_type(apps, schema_editor),
        lock=RECEIPTS_LOCK,
    ))


def drop_function(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    user_id = user_id_type(apps, schema_editor)
    schema_editor.execute(
        f"DROP FUNCTION IF EXISTS messaging_move_watermarks_v2(text, {user_id}, bigint, bigint, bigint, bigint)"
    )


class Migration(migrations.Migration):

    dependencies = [
        ('messaging', '0007_move_watermarks_function'),
    ]

    operations = [
        migrations.RunPython(create_function, drop_function),
    ]
