CREATE OR REPLACE FUNCTION messaging_move_watermarks_v3(
    p_room text, p_user {user_id}, p_delivered bigint, p_read bigint, p_members_upto bigint, p_states_limit bigint,
    p_command_id text, p_events boolean,
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
    all_delivered bigint[];
    all_read bigint[];
    moved_count bigint;
    events_before bigint;
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
        SELECT (SELECT array_agg(newest.seq ORDER BY newest.seq) FROM newest),
               (SELECT array_agg(newest.sender_id ORDER BY newest.seq) FROM newest),
               (SELECT array_agg(moved.seq ORDER BY moved.seq) FROM moved)
        INTO delivered_seqs, delivered_senders, all_delivered;
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
        SELECT (SELECT array_agg(newest.seq ORDER BY newest.seq) FROM newest),
               (SELECT array_agg(newest.sender_id ORDER BY newest.seq) FROM newest),
               (SELECT array_agg(moved.seq ORDER BY moved.seq) FROM moved)
        INTO read_seqs, read_senders, all_read;
    END IF;
    -- One `message.state` event per message moved, delivered ones first, each
    -- in seq order. The room's row is taken last, after the messages' rows, as
    -- every effect takes it (messaging/events/outbox.py): nothing waits for a
    -- row while holding it.
    moved_count := coalesce(cardinality(all_delivered), 0) + coalesce(cardinality(all_read), 0);
    IF p_events AND moved_count > 0 THEN
        UPDATE {room} SET last_event = last_event + moved_count WHERE id = member.room_id
        RETURNING last_event - moved_count INTO events_before;
        INSERT INTO {event} (event_id, type, room_id, room, position, data, created_at)
        SELECT gen_random_uuid(), 'message.state', member.room_id, p_room,
               events_before + row_number() OVER (ORDER BY x.k, x.seq),
               jsonb_build_object('room', p_room, 'seq', x.seq, 'state', x.state,
                                  'at', to_char(moved_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                  'command_id', p_command_id, 'user', to_jsonb(p_user)),
               moved_at
        FROM (SELECT d.seq, 'delivered' AS state, 1 AS k FROM unnest(all_delivered) AS d(seq)
              UNION ALL SELECT r.seq, 'read', 2 FROM unnest(all_read) AS r(seq)) AS x
        ORDER BY x.k, x.seq;
    END IF;
    RETURN NEXT;
END
$$
