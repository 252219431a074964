"""`python -m bench.idle_checks`: what idle signed-in sockets cost one server process in credential checks.

One daphne process of the demo project (DEBUG off), a PostgreSQL database
and Redis db of the bench's own. `--sockets` users each get a session of
their own (as `/login/` would make it; `--tokens` of them an API token
instead), and each opens one socket that then sends nothing. After the
checks have settled (two intervals, at least 15 s), for `--seconds`: the server's CPU time
(user + system, from /proc/<pid>/stat) and the transactions its database
committed (`pg_stat_database`, read from another database so that the
bench's own reads are not counted; every check's query is one autocommit
transaction; `--interval 0` turns the checks off, for what the process
does without them), per `SESSION_CHECK_INTERVAL` (docs/PERFORMANCE.md,
"Idle sockets"); and the Redis commands the bench's
db received (`INFO commandstats`, the presence heartbeats), and the server's
resident memory before the first socket and with all of them open, per
socket (docs/PERFORMANCE.md, "Idle sockets"); and the CPU every PostgreSQL
process of the box spent in the same window. `--server uvicorn` runs
uvicorn as a deployment does instead of daphne.

Traffic goes to 127.0.0.1 only; every run is bounded in count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import tempfile
import threading
import time
from pathlib import Path

import psycopg
import redis
import websockets

from .http_vs_socket import manage, server_env
from .measure import service_cpu, services_spent
from .servers import ROOT, UVICORN_ARGS, Server

SESSIONS_AND_TOKENS = """
import json
from importlib import import_module
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from messaging.transport.tokens import create_token
users = get_user_model().objects.bulk_create(
    get_user_model()(username=f"idle-{{n}}", first_name=f"idle {{n}}") for n in range({sockets}))
store = import_module(settings.SESSION_ENGINE).SessionStore
out = []
for n, user in enumerate(users):
    if n < {tokens}:
        out.append({{"token": create_token(user, "idle")[1]}})
        continue
    session = store()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    out.append({{"session": session.session_key}})
print(json.dumps(out))
"""


SETTLE = 15.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.idle_checks", description=__doc__.splitlines()[0])
    p.add_argument("--database", default="postgres://postgres@127.0.0.1:5432/messaging_bench_idle")
    p.add_argument("--redis", default="redis://127.0.0.1:6379/13", help="a db of the bench's own: it is flushed")
    p.add_argument("--sockets", type=int, default=2000, help="idle sockets, one user and credential each")
    p.add_argument("--tokens", type=int, default=0, help="how many of them sign in with an API token")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--interval", type=float, default=5.0, help="MESSAGING_SESSION_CHECK_INTERVAL")
    p.add_argument("--server", choices=("daphne", "uvicorn"), default="daphne")
    p.add_argument(
        "--server-args", default="", help="the server's own options, added (e.g. daphne's `--ping-interval 300`)"
    )
    p.add_argument("--out", type=Path, default=ROOT / "artifacts" / "idle_checks.json")
    return p.parse_args()


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far (fields 14 and 15 of /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    """The process's resident memory (field 24 of /proc/<pid>/stat, in pages)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[21]) * os.sysconf("SC_PAGE_SIZE")


class RedisCommands:
    """The commands Redis runs on the bench's db while open, by name (`MONITOR`: other dbs' are not counted)."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.db = self.client.connection_pool.connection_kwargs.get("db", 0)
        self.counts: dict[str, int] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.listen, daemon=True)

    def __enter__(self) -> RedisCommands:
        self.thread.start()
        return self

    def listen(self) -> None:
        while not self.stopped.is_set():
            try:
                self.count()
            except redis.TimeoutError:
                continue  # a quiet moment: listen again

    def count(self) -> None:
        with self.client.monitor() as monitor:
            for command in monitor.listen():
                if self.stopped.is_set():
                    return
                if command.get("db") == self.db:
                    name = command["command"].split(" ", 1)[0].lower()
                    if command.get("client_type") == "lua":
                        name = f"{name} (by a script)"
                    self.counts[name] = self.counts.get(name, 0) + 1

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        # The next command anywhere wakes the listener.
        self.client.ping()
        self.thread.join(timeout=5)


def committed(database: str) -> int:
    base, name = database.rsplit("/", 1)
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        return conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", [name]
        ).fetchone()[0]


async def hold(
    port: int, credentials: list[dict], seconds: float, interval: float, pid: int, database: str, redis_url: str
) -> dict:
    gate = asyncio.Semaphore(20)

    async def open_one(credential: dict):
        headers = (
            {"Authorization": f"Bearer {credential['token']}"}
            if "token" in credential
            else {"Cookie": f"sessionid={credential['session']}"}
        )
        async with gate:
            return await websockets.connect(
                f"ws://127.0.0.1:{port}/ws/",
                origin=f"http://127.0.0.1:{port}",
                additional_headers=headers,
                open_timeout=60,
                compression=None,
                ping_interval=None,
            )

    rss_before = rss_bytes(pid)
    sockets = await asyncio.gather(*(open_one(c) for c in credentials))
    # The checks spread out, and what the handshakes did reaches the statistics
    # (an idle backend reports within 10 s).
    await asyncio.sleep(max(2 * interval, SETTLE))
    with RedisCommands(redis_url) as commands:
        services = service_cpu()
        cpu, transactions, started = cpu_seconds(pid), await asyncio.to_thread(committed, database), time.monotonic()
        await asyncio.sleep(seconds)
        cpu, elapsed = cpu_seconds(pid) - cpu, time.monotonic() - started
        services = services_spent(services, service_cpu())
    rss_after = rss_bytes(pid)
    # The statistics a backend reports reach pg_stat_database within a second or so.
    await asyncio.sleep(1.5)
    transactions = await asyncio.to_thread(committed, database) - transactions
    still_open = sum(ws.close_code is None for ws in sockets)
    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    return {
        "sockets": len(sockets),
        "still_open": still_open,
        "seconds": round(elapsed, 1),
        "server_cpu_seconds": round(cpu, 2),
        "server_cpu_share": round(cpu / elapsed, 4),
        "transactions": transactions,
        "transactions_per_interval": round(transactions * interval / elapsed, 1),
        "redis_commands_per_second": round(sum(commands.counts.values()) / elapsed, 1),
        "redis_commands": commands.counts,
        "rss_before_mb": round(rss_before / 2**20, 1),
        "rss_mb": round(rss_after / 2**20, 1),
        "kb_per_socket": round((rss_after - rss_before) / len(sockets) / 1024, 2),
        "cpu_share_per_10k": round(cpu / elapsed * 10000 / len(sockets), 4),
        # Every PostgreSQL process of the box: run nothing else beside the bench. (Redis's own CPU
        # is not reported: the bench's `MONITOR`, which counts its commands, costs Redis more than they do.)
        "postgresql_cpu_share": round(services["postgresql"] / elapsed, 4),
    }


def main() -> None:
    args = parse_args()
    env = server_env(args.database, args.redis, MESSAGING_SESSION_CHECK_INTERVAL=str(args.interval))
    script = SESSIONS_AND_TOKENS.format(sockets=args.sockets, tokens=args.tokens)
    # The last line: `shell` may say first what it imported.
    credentials = json.loads(manage(env, "shell", "-c", script).strip().splitlines()[-1])
    # So that autovacuum has nothing to do on the new rows while the bench counts.
    with psycopg.connect(args.database, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    own = (*(UVICORN_ARGS if args.server == "uvicorn" else ()), *shlex.split(args.server_args))
    server = Server(args.server, env, Path(tempfile.mkdtemp()), app="project.asgi:application", args=own).start()
    try:
        report = asyncio.run(
            hold(server.port, credentials, args.seconds, args.interval, server.pid, args.database, args.redis)
        )
    finally:
        server.stop()
    report |= {"server": args.server, "server_args": args.server_args, "tokens": args.tokens, "interval": args.interval}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
