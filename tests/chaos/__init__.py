"""Exactly once at random: a history checker under a nemesis (`make chaos`, issue 20).

Many outbox clients speak the protocol to real daphne processes over a
PostgreSQL database and a Redis of the harness's own, while a seeded nemesis
kills, stops, pauses, flushes, locks and cuts at random, overlapping times.
Every command, attempt, answer and frame the clients see is recorded; at the
end a checker proves the protocol's properties over that history and the
database. Only the planted bugs and the test command type reach into the
server, all of it in `hooks`.

- `stack`: the real parts (database, redis-server, daphne processes)
- `hooks`: what the harness's servers load (the `wallet.add` type, planted bugs)
- `app`: the ASGI module those servers serve
- `history`: the record of what clients sent and were told, and of the faults
- `client`: the outbox client, persisted to a file
- `nemesis`: the seeded fault schedule and its execution
- `truth`: what the database holds, read by SQL
- `checker`: the properties, over the history and the database
- `harness`: one run, start to verdict; `python -m tests.chaos` runs it
"""
