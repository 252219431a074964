"""The link nemesis: two federated deployments, and faults on the link between them (`make chaos`, PROTOCOL 1.2).

Deployments `a` and `b` (each its own database, redis-server and daphne
processes) share rooms: `hall` lives on `a`, `yard` on `b`, and each has a
room of its own no peer joins. Outbox clients on both sides post, edit and
delete in them and read remote rooms' history, while a seeded nemesis
strikes the fault proxies between the deployments (tests/support/faultproxy.py):
requests dropped, delayed, cut after they applied (their answers lost), reset,
and connections refused for a while. Then the link heals, the outboxes
drain, and the checker proves, over the history and both databases:

- every command acked `ok` exists exactly once on its room's home and on
  the replica: same seq, same body, same version (`doubles`: 0, `losses`: 0);
- the replica converges on its home with no client action, and every
  client's socket saw every message of its rooms;
- each side served its own rooms throughout, and the replicas' history.

- `clients`: the outbox clients, and the history they record
- `nemesis`: the seeded fault schedule on the two proxies
- `checker`: the properties
- `run`: one run, start to verdict; `python -m tests.chaos.link` runs it
"""
