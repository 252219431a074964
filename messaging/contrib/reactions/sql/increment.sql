INSERT INTO {table} (message_id, count, room_id, rev) VALUES (%s, 1, %s, %s)
ON CONFLICT (message_id) DO UPDATE SET count = {table}.count + 1, room_id = EXCLUDED.room_id, rev = EXCLUDED.rev
RETURNING count
