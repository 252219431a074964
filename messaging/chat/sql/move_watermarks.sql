SELECT * FROM messaging_move_watermarks_v2(%(room)s, %(user)s, %(delivered)s, %(read)s, %(members_upto)s, %(states_limit)s)
