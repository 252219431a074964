WITH item AS (
    SELECT e.n, e.v->>0 AS room, (e.v->>1)::{user_id} AS user_id, e.v->>2 AS command_id, e.v->>3 AS body,
           e.v->>4 AS fingerprint, e.v->1 AS user_json, e.v->>5 AS name, e.v->>6 AS node
    FROM jsonb_array_elements(%(items)s::jsonb) WITH ORDINALITY AS e(v, n)
    -- count is the array's length, so every post is kept. The LIMIT is for
    -- the planner: its generic plan then takes a batch for a tenth of the 100
    -- rows it assumes of any array, and looks each room up by slug instead of
    -- hashing the whole room table in every batch.
    LIMIT %(count)s
), known AS MATERIALIZED (
    SELECT i.n, c.fingerprint, c.result::text AS result FROM item i
    JOIN {record} c ON c.user_id = i.user_id AND c.command_id = i.command_id
), member AS (
    SELECT i.n, m.room_id FROM item i
    JOIN {room} r ON r.slug = i.room
    JOIN {membership} m ON m.room_id = r.id AND m.user_id = i.user_id
    WHERE NOT EXISTS (SELECT FROM known k WHERE k.n = i.n)
), locked AS MATERIALIZED (
    SELECT r.id, c.posts FROM {room} r
    JOIN (SELECT room_id, count(*) AS posts FROM member GROUP BY room_id) c ON c.room_id = r.id
    ORDER BY r.id FOR UPDATE OF r
), taken AS (
    UPDATE {room} r SET last_seq = r.last_seq + l.posts, last_rev = r.last_rev + l.posts,
           last_event = r.last_event + l.posts
    FROM locked l WHERE r.id = l.id
    RETURNING r.id, r.last_seq - l.posts AS before, r.last_rev - l.posts AS rev_before,
              r.last_event - l.posts AS events_before
), stamp AS MATERIALIZED (
    SELECT at, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at_text
    FROM (SELECT clock_timestamp() AS at FROM (SELECT count(*) FROM taken) t) now
), post AS (
    SELECT n, room_id, before + k AS seq, rev_before + k AS rev, {event_id} AS event_id FROM (
        SELECT m.n, m.room_id, t.before, t.rev_before, row_number() OVER (PARTITION BY m.room_id ORDER BY m.n) AS k
        FROM member m JOIN taken t ON t.id = m.room_id
    ) numbered
), message AS (
    INSERT INTO {message} (room_id, seq, sender_id, client_msg_id, body, state, sent_at, version, posted_rev, rev,
                           posted_event_id)
    SELECT p.room_id, p.seq, i.user_id, i.command_id, i.body, %(state)s, s.at, 1, p.rev, p.rev, p.event_id
    FROM post p JOIN item i USING (n), stamp s
), record AS (
    INSERT INTO {record} (user_id, command_id, type, fingerprint, result, created_at)
    SELECT i.user_id, i.command_id, %(type)s, i.fingerprint,
           jsonb_build_object('room', i.room, 'seq', p.seq, 'at', s.at_text), s.at
    FROM post p JOIN item i USING (n), stamp s
){events}
SELECT p.n, p.seq, s.at_text, p.rev, NULL, NULL FROM post p, stamp s
UNION ALL
SELECT k.n, NULL, NULL, NULL, k.fingerprint, k.result FROM known k
