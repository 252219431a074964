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
