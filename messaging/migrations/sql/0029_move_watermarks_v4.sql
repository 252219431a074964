CREATE OR REPLACE FUNCTION messaging_move_watermarks_v4(
    p_rooms text[], p_users {user_id}[], p_delivered bigint[], p_read bigint[], p_command_ids text[],
    p_members_upto bigint, p_states_limit bigint, p_events boolean,
    OUT receipt bigint, OUT last_seq bigint, OUT old_delivered bigint, OUT old_read bigint,
    OUT new_delivered bigint, OUT new_read bigint,
    OUT members bigint, OUT moved_at timestamptz,
    OUT delivered_seqs bigint[], OUT delivered_senders {user_id}[],
    OUT read_seqs bigint[], OUT read_senders {user_id}[]
) RETURNS SETOF record LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    given record;
    member record;
    delivered_after bigint;
    read_after bigint;
    all_delivered bigint[];
    all_read bigint[];
    moved_count bigint;
    events_before bigint;
    -- The batch's events, written after every receipt's messages (below).
    pending jsonb := '[]'::jsonb;
    event_room bigint;
BEGIN
    FOR given IN
        SELECT x.i, x.room, x.member_user, x.delivered, x.read, x.command_id, r.id AS room_id, r.last_seq
        FROM unnest(p_rooms, p_users, p_delivered, p_read, p_command_ids)
             WITH ORDINALITY AS x(room, member_user, delivered, read, command_id, i)
        LEFT JOIN {room} r ON r.slug = x.room
        ORDER BY r.id, x.member_user, x.i
    LOOP
        receipt := given.i;
        last_seq := NULL; old_delivered := NULL; old_read := NULL; new_delivered := NULL; new_read := NULL;
        members := NULL; moved_at := NULL;
        delivered_seqs := NULL; delivered_senders := NULL; read_seqs := NULL; read_senders := NULL;
        all_delivered := NULL; all_read := NULL;
        IF given.room_id IS NULL THEN
            RETURN NEXT;
            CONTINUE;
        END IF;
        -- The room's lock before its member's row (this migration's docstring).
        PERFORM pg_advisory_xact_lock({lock}, mod(given.room_id, 2147483648)::integer);
        SELECT m.id, m.joined_seq, m.delivered, m.read INTO member
        FROM {membership} m WHERE m.room_id = given.room_id AND m.user_id = given.member_user
        FOR UPDATE;
        IF NOT FOUND THEN
            RETURN NEXT;
            CONTINUE;
        END IF;
        last_seq := given.last_seq;
        old_delivered := member.delivered;
        old_read := member.read;
        IF coalesce(given.delivered, 0) > given.last_seq OR coalesce(given.read, 0) > given.last_seq THEN
            RETURN NEXT;
            CONTINUE;
        END IF;
        -- Never lower, and read implies delivered (`receipts.Watermarks.forward`).
        new_read := greatest(member.read, coalesce(given.read, 0));
        new_delivered := greatest(member.delivered, coalesce(given.delivered, 0), new_read);
        IF new_delivered = member.delivered AND new_read = member.read THEN
            RETURN NEXT;
            CONTINUE;
        END IF;

        moved_at := clock_timestamp();
        UPDATE {membership} SET delivered = new_delivered, read = new_read WHERE id = member.id;
        INSERT INTO {move} (membership_id, delivered, read, at) VALUES (member.id, new_delivered, new_read, moved_at);
        SELECT count(*) INTO members
        FROM (SELECT FROM {membership} o WHERE o.room_id = given.room_id LIMIT p_members_upto + 1) AS counted;

        -- A member is a recipient only of messages after it joined
        -- (`receipts.recipients`), so it is one of every message in the
        -- range but its own; a message moves once no other member's
        -- effective watermark is behind it (this migration's docstring).
        -- Each subquery is uncorrelated (an InitPlan, run once per UPDATE)
        -- and reads one or two rows of an index.
        delivered_after := greatest(member.delivered, member.joined_seq);
        IF new_delivered > delivered_after THEN
            WITH moved AS (
                UPDATE {message} g SET state = 'delivered', delivered_at = moved_at
                WHERE g.room_id = given.room_id AND g.seq > delivered_after AND g.seq <= new_delivered
                  AND g.state = 'sent'
                  AND g.seq <= CASE
                      WHEN g.sender_id = (SELECT o.user_id FROM {membership} o WHERE o.room_id = given.room_id
                                          ORDER BY greatest(o.delivered, o.joined_seq) LIMIT 1)
                      THEN (SELECT greatest(o.delivered, o.joined_seq) FROM {membership} o
                            WHERE o.room_id = given.room_id
                            ORDER BY greatest(o.delivered, o.joined_seq) LIMIT 1 OFFSET 1)
                      ELSE (SELECT greatest(o.delivered, o.joined_seq) FROM {membership} o
                            WHERE o.room_id = given.room_id
                            ORDER BY greatest(o.delivered, o.joined_seq) LIMIT 1)
                  END
                  -- The mover's own message needs another member who joined before it.
                  AND (g.sender_id <> given.member_user
                       OR g.seq > (SELECT o.joined_seq FROM {membership} o
                                   WHERE o.room_id = given.room_id AND o.user_id <> given.member_user
                                   ORDER BY o.joined_seq LIMIT 1))
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
                WHERE g.room_id = given.room_id AND g.seq > read_after AND g.seq <= new_read
                  AND g.state IN ('sent', 'delivered')
                  AND g.seq <= CASE
                      WHEN g.sender_id = (SELECT o.user_id FROM {membership} o WHERE o.room_id = given.room_id
                                          ORDER BY greatest(o.read, o.joined_seq) LIMIT 1)
                      THEN (SELECT greatest(o.read, o.joined_seq) FROM {membership} o
                            WHERE o.room_id = given.room_id
                            ORDER BY greatest(o.read, o.joined_seq) LIMIT 1 OFFSET 1)
                      ELSE (SELECT greatest(o.read, o.joined_seq) FROM {membership} o
                            WHERE o.room_id = given.room_id
                            ORDER BY greatest(o.read, o.joined_seq) LIMIT 1)
                  END
                  AND (g.sender_id <> given.member_user
                       OR g.seq > (SELECT o.joined_seq FROM {membership} o
                                   WHERE o.room_id = given.room_id AND o.user_id <> given.member_user
                                   ORDER BY o.joined_seq LIMIT 1))
                RETURNING g.seq, g.sender_id
            ), newest AS (
                SELECT moved.seq, moved.sender_id FROM moved ORDER BY moved.seq DESC LIMIT p_states_limit
            )
            SELECT (SELECT array_agg(newest.seq ORDER BY newest.seq) FROM newest),
                   (SELECT array_agg(newest.sender_id ORDER BY newest.seq) FROM newest),
                   (SELECT array_agg(moved.seq ORDER BY moved.seq) FROM moved)
            INTO read_seqs, read_senders, all_read;
        END IF;
        -- One `message.state` event per message moved, as in version 3,
        -- written once every receipt's messages are done (below).
        IF p_events THEN
            pending := pending || (
                SELECT coalesce(jsonb_agg(jsonb_build_object(
                           'room_id', given.room_id, 'at', moved_at,
                           'data', jsonb_build_object(
                               'room', given.room, 'seq', x.seq, 'state', x.state,
                               'at', to_char(moved_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                               'command_id', given.command_id, 'user', to_jsonb(given.member_user)))
                       ORDER BY x.k, x.seq), '[]'::jsonb)
                FROM (SELECT d.seq, 'delivered' AS state, 1 AS k FROM unnest(all_delivered) AS d(seq)
                      UNION ALL SELECT r.seq, 'read', 2 FROM unnest(all_read) AS r(seq)) AS x);
            -- In a room shared with another deployment (migration 0029), the move itself,
            -- after its states: the peers' replicas tell their sockets (`status`).
            IF EXISTS (SELECT FROM {peerroom} p WHERE p.room_id = given.room_id) THEN
                pending := pending || jsonb_build_array(jsonb_build_object(
                    'room_id', given.room_id, 'at', moved_at, 'type', 'member.watermarks',
                    'data', jsonb_build_object(
                        'room', given.room, 'user', to_jsonb(given.member_user),
                        'delivered', new_delivered, 'read', new_read, 'members', members,
                        'command_id', given.command_id)));
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
    -- The events, room by room in room id order, each room's in the order
    -- its receipts moved them. The rooms' rows are taken last, after every
    -- message row of the batch, as every effect takes them
    -- (messaging/events/outbox.py): an edit holding a message's row and
    -- waiting for its room's cannot wait on a batch that holds the room's
    -- row and waits for the message's.
    FOR event_room IN
        SELECT DISTINCT (e.v->>'room_id')::bigint FROM jsonb_array_elements(pending) AS e(v) ORDER BY 1
    LOOP
        SELECT count(*) INTO moved_count FROM jsonb_array_elements(pending) AS e(v)
        WHERE (e.v->>'room_id')::bigint = event_room;
        UPDATE {room} SET last_event = last_event + moved_count WHERE id = event_room
        RETURNING last_event - moved_count INTO events_before;
        INSERT INTO {event} (event_id, type, room_id, room, position, data, created_at)
        SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid, coalesce(e.v->>'type', 'message.state'), event_room, e.v->'data'->>'room',
               events_before + row_number() OVER (ORDER BY e.n), e.v->'data', (e.v->>'at')::timestamptz
        FROM jsonb_array_elements(pending) WITH ORDINALITY AS e(v, n)
        WHERE (e.v->>'room_id')::bigint = event_room
        ORDER BY e.n;
    END LOOP;
END
$$
