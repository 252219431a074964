SELECT * FROM messaging_move_watermarks_v4(%(rooms)s::text[], %(users)s, %(delivered)s::bigint[], %(read)s::bigint[], %(command_ids)s::text[], %(members_upto)s, %(states_limit)s, %(events)s)
