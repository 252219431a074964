WITH item AS (
    SELECT e.n, e.v->>0 AS room, (e.v->>1)::{user_id} AS user_id, e.v->>2 AS command_id, e.v->>3 AS body,
           e.v->>4 AS fingerprint, e.v->1 AS user_json, e.v->>5 AS name, e.v->>6 AS node,
           (e.v->>7)::bigint AS reply_to
    FROM jsonb_array_elements(%(items)s::jsonb) WITH ORDINALITY AS e(v, n)
    -- count is the array's length, so every post is kept. The LIMIT is for
    -- the planner: its generic plan then takes a batch for a tenth of the 100
    -- rows it assumes of any array, and looks each room up by slug instead of
    -- hashing the whole room table in every batch.
    LIMIT %(count)s
), known AS MATERIALIZED (
    SELECT i.n, c.fingerprint, c.result::text AS result FROM item i
    JOIN {record} c ON c.user_id = i.user_id AND c.command_id = i.command_id
-- threads:begin (replies, messaging/chat/threads.py; left out of a batch without any)
), rootless AS MATERIALIZED (
    -- Replies whose root is not a message of their room that takes replies (not a reply
    -- itself, not deleted): declined, and the portable path refuses them (messaging/chat/threads.py).
    SELECT i.n FROM item i
    WHERE i.reply_to IS NOT NULL AND NOT EXISTS (SELECT FROM known k WHERE k.n = i.n) AND NOT EXISTS (
        SELECT FROM {message} r JOIN {room} o ON o.id = r.room_id
        WHERE o.slug = i.room AND r.seq = i.reply_to AND r.reply_to IS NULL AND r.deleted_at IS NULL
    )
-- threads:end
-- files:begin (the posts' files, messaging/chat/attachments.py; left out of a batch without any)
), attached AS MATERIALIZED (
    -- The posts with files: each one's n, its files as the message keeps them, and as its frames show them.
    SELECT (a->>0)::bigint AS n, a->1 AS kept, a->2 AS shown FROM jsonb_array_elements(%(attachments)s::jsonb) a
), held AS MATERIALIZED (
    -- Their uploads not posted yet, locked in id order before any room: a post of
    -- one of them that commits first leaves it out (FOR UPDATE reads it again).
    SELECT u.id, u.user_id FROM {upload} u
    WHERE u.id = ANY (ARRAY(SELECT (f->>'upload')::uuid FROM attached t, jsonb_array_elements(t.kept) f))
      AND u.room_id IS NULL
    ORDER BY u.id FOR UPDATE OF u
), declined AS MATERIALIZED (
    -- Posts with a file not held for their sender: the portable path settles them.
    SELECT t.n FROM attached t JOIN item i USING (n)
    WHERE NOT EXISTS (SELECT FROM known k WHERE k.n = t.n) AND EXISTS (
        SELECT FROM jsonb_array_elements(t.kept) f LEFT JOIN held h ON h.id = (f->>'upload')::uuid
        WHERE h.user_id IS DISTINCT FROM i.user_id
    )
-- files:end
), member AS (
    SELECT i.n, m.room_id, i.reply_to FROM item i
    JOIN {room} r ON r.slug = i.room
    JOIN {membership} m ON m.room_id = r.id AND m.user_id = i.user_id
    WHERE NOT EXISTS (SELECT FROM known k WHERE k.n = i.n)
      AND NOT EXISTS (SELECT FROM rootless x WHERE x.n = i.n)  -- threads
      AND NOT EXISTS (SELECT FROM declined d WHERE d.n = i.n)  -- files
), locked AS MATERIALIZED (
    SELECT r.id, c.posts, c.replies FROM {room} r
    JOIN (SELECT room_id, count(*) AS posts, count(reply_to) AS replies FROM member GROUP BY room_id) c ON c.room_id = r.id
    ORDER BY r.id FOR UPDATE OF r
), taken AS (
    -- A reply takes two revs (and event positions with the outbox on): its post's, then its root's thread's.
    UPDATE {room} r SET last_seq = r.last_seq + l.posts, last_rev = r.last_rev + l.posts{thread_revs},
           last_event = r.last_event + l.posts + {thread_positions}
    FROM locked l WHERE r.id = l.id
    RETURNING r.id, r.last_seq - l.posts AS before, r.last_rev - l.posts{thread_revs_back} AS rev_before,
              r.last_event - l.posts - {thread_positions} AS events_before, l.posts
), stamp AS MATERIALIZED (
    SELECT at, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at_text
    FROM (SELECT clock_timestamp() AS at FROM (SELECT count(*) FROM taken) t) now
), post AS (
    -- Per room in batch order: a post's rev follows the revs of the posts before it and of their threads.
    SELECT n, room_id, reply_to, before + k AS seq, rev_before + k{thread_rev} AS rev, {event_id} AS event_id FROM (
        SELECT m.n, m.room_id, m.reply_to, t.before, t.rev_before,
               count(m.reply_to) OVER (PARTITION BY m.room_id ORDER BY m.n ROWS UNBOUNDED PRECEDING EXCLUDE CURRENT ROW) AS earlier,  -- threads
               row_number() OVER (PARTITION BY m.room_id ORDER BY m.n) AS k
        FROM member m JOIN taken t ON t.id = m.room_id
    ) numbered
), message AS (
    INSERT INTO {message} (room_id, seq, sender_id, client_msg_id, body, state, sent_at, version, posted_rev, rev,
                           posted_event_id, attachments, reply_to)
    SELECT p.room_id, p.seq, i.user_id, i.command_id, i.body, %(state)s, s.at, 1, p.rev, p.rev, p.event_id,
           {files_kept}, p.reply_to
    FROM post p JOIN item i USING (n), stamp s
), record AS (
    INSERT INTO {record} (user_id, command_id, type, fingerprint, result, created_at)
    SELECT i.user_id, i.command_id, %(type)s, i.fingerprint,
           jsonb_build_object('room', i.room, 'seq', p.seq, 'at', s.at_text), s.at
    FROM post p JOIN item i USING (n), stamp s
-- files:begin
), attach AS (
    UPDATE {upload} u SET room_id = p.room_id, seq = p.seq
    FROM attached a JOIN post p USING (n), jsonb_array_elements(a.kept) f
    WHERE u.id = (f->>'upload')::uuid
-- files:end
-- threads:begin
), replied AS (
    -- The replies (messaging/chat/threads.py): each one's root, its thread's rev (the one after
    -- its post's), and how many of the batch reply to its root after it (its `thread` frame's
    -- count is the root's less those).
    SELECT p.n, p.room_id, p.rev + 1 AS rev, r.id AS root_id,
           row_number() OVER (PARTITION BY r.id ORDER BY p.n DESC) - 1 AS later
    FROM post p JOIN {message} r ON r.room_id = p.room_id AND r.seq = p.reply_to
    WHERE p.reply_to IS NOT NULL
), threaded AS (
    -- Under the room's row lock: ON CONFLICT reads the root's thread as last committed.
    INSERT INTO {thread} AS h (root_id, room_id, replies, last_reply_at, rev)
    SELECT x.root_id, min(x.room_id), count(*), (SELECT at FROM stamp), max(x.rev) FROM replied x GROUP BY x.root_id
    ON CONFLICT (root_id) DO UPDATE SET replies = h.replies + EXCLUDED.replies,
        last_reply_at = EXCLUDED.last_reply_at, rev = EXCLUDED.rev
    RETURNING h.root_id, h.replies
-- threads:end
){events}{thread_events}
SELECT p.n, p.seq, s.at_text, p.rev, NULL, NULL, {thread_replies}
FROM post p{thread_joins}, stamp s
UNION ALL
SELECT k.n, NULL, NULL, NULL, k.fingerprint, k.result, NULL FROM known k
UNION ALL  -- threads
SELECT x.n, NULL, NULL, NULL, NULL, NULL, NULL FROM rootless x  -- threads
UNION ALL  -- files
SELECT d.n, NULL, NULL, NULL, NULL, NULL, NULL FROM declined d  -- files
