INSERT INTO {table} (message_id, count) VALUES (%s, 1)
ON CONFLICT (message_id) DO UPDATE SET count = {table}.count + 1 RETURNING count
