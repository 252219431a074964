"""`room.search` on a room of 1,000,000 messages, and uploads of 1 MiB files (`python -m bench --search`).

The room is seeded in bulk, untimed, as bench/seed.py seeds its rooms: one
INSERT ... SELECT over generate_series, each message eight to twelve words
of a vocabulary of 50,000 (`w0` ... `w49999`), drawn so that a few words
are in most messages and most words in few (the index of a word is 50,000
x r^4 for a uniform r), each at its own time. The search index is dropped for
the insert and built after it, as a deployment's would be after a restore.

Then one server process (the full path) and one socket, which joins the
room and sends `room.search` commands one after the other, each query
kind `--search-queries` times, words drawn from its band (how many
messages hold them is counted and reported): the commonest word, words in
about one message in a thousand, words in a few dozen, two words (a common
and a rarer one), a word that is in none, and the common word's second page
(`before`), all with `room`; and the commonest word without it (across the
user's rooms, here the one). Latency is from the command's send to its ack. And `POST /api/uploads` of `--uploads` files of
1 MiB, four at a time, each with its own key: uploads/s, MiB/s and each
request's latency.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from importlib import import_module
from pathlib import Path

import psycopg

from messaging.testing import SocketClient
from messaging_client import sign_in

ROOM = "search-big"
SEEDER = "search-seed"
VOCABULARY = 50_000
# Word bands, by the index of a word (VOCABULARY x r^4: w0 is in about half the messages).
BANDS = {
    "commonest word": (0, 1),
    "word in ~1 message of 1,000": (1000, 1100),
    "word in a few dozen messages": (45_000, 50_000),
    "two words": None,
    "absent word": None,
    "second page of the commonest word": None,
    "commonest word, all the user's rooms": None,
}
MIB = 1024 * 1024
DOCUMENT_INDEX = "messaging_message_search"


def seed_room(database: str, messages: int) -> None:
    """The room `search-big` of `messages` messages, the search index rebuilt after them, analyzed."""
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DELETE FROM messaging_room WHERE slug = %s", [ROOM])
        conn.execute(
            "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff,"
            " is_active, date_joined) VALUES ('', false, %s, 'seed', '', '', false, true, now())"
            " ON CONFLICT (username) DO NOTHING",
            [SEEDER],
        )
        definition = conn.execute("SELECT pg_get_indexdef(%s::regclass)", [DOCUMENT_INDEX]).fetchone()[0]
        conn.execute(f"DROP INDEX {DOCUMENT_INDEX}")
        try:
            conn.execute(
                "INSERT INTO messaging_room (slug, last_seq, last_rev, last_event, private, created_at)"
                " VALUES (%s, %s, %s, 0, false, now())",
                [ROOM, messages, messages],
            )
            conn.execute(
                "INSERT INTO messaging_message (room_id, seq, sender_id, client_msg_id, body, state, sent_at, version,"
                " posted_rev, rev)"
                " SELECT r.id, g, u.id, 'search-' || g,"
                "  (SELECT string_agg('w' || floor(%(vocabulary)s * random() ^ 4)::int, ' ')"
                "   FROM generate_series(1, 8 + g %% 5)),"
                "  'sent', now() - interval '30 days' + g * interval '1 millisecond', 1, g, g"
                " FROM generate_series(1, %(messages)s) g, messaging_room r, auth_user u"
                " WHERE r.slug = %(room)s AND u.username = %(seeder)s",
                {"vocabulary": VOCABULARY, "messages": messages, "room": ROOM, "seeder": SEEDER},
            )
        finally:
            conn.execute("SET maintenance_work_mem = '256MB'")
            conn.execute(definition)
            # As migration 0031 sets it (the index's definition does not carry it).
            conn.execute(f"ALTER INDEX {DOCUMENT_INDEX} ALTER COLUMN 1 SET STATISTICS 1000")
        conn.execute("ANALYZE messaging_message")


def queries(kind: str, rand: random.Random) -> dict:
    if kind == "two words":
        return {"q": f"w{rand.randrange(0, 3)} w{rand.randrange(1000, 1100)}", "room": ROOM}
    if kind == "absent word":
        return {"q": f"nowhere{rand.randrange(10**6)}", "room": ROOM}
    if kind == "commonest word, all the user's rooms":
        return {"q": "w0"}
    band = BANDS[kind] or BANDS["commonest word"]
    return {"q": f"w{rand.randrange(*band)}", "room": ROOM}


def holding(database: str, kinds: list[str], rand: random.Random) -> dict:
    """How many messages hold the words of each band (a few drawn from it, the median)."""
    # The index's expression as its migration writes it (this process has no Django set up).
    document = import_module("messaging.migrations.0031_message_search").DOCUMENT.replace("%", "%%")
    counts = {}
    with psycopg.connect(database, autocommit=True) as conn:
        for kind in kinds:
            found = [
                conn.execute(
                    f"SELECT count(*) FROM messaging_message WHERE {document} @@ plainto_tsquery('simple', %s)",
                    [queries(kind, rand)["q"]],
                ).fetchone()[0]
                for _ in range(3)
            ]
            counts[kind] = statistics.median(found)
    return counts


def percentiles(ms: list[float]) -> dict:
    cuts = statistics.quantiles(ms, n=100) if len(ms) > 1 else ms * 99
    return {"p50_ms": round(statistics.median(ms), 2), "p99_ms": round(cuts[98], 2), "n": len(ms)}


async def search_latency(url: str, session: str, per_kind: int) -> dict:
    rand = random.Random(11)
    socket = await SocketClient(url, session).connect()
    found: dict[str, list[float]] = {kind: [] for kind in BANDS}
    results: dict[str, list[int]] = {kind: [] for kind in BANDS}
    try:
        assert (await socket.call("room.join", {"room": ROOM}))["ok"]
        for _ in range(per_kind):
            for kind in BANDS:
                d = queries(kind, rand)
                if kind == "second page of the commonest word":
                    first = await socket.call("room.search", d)
                    d["before"] = first["d"]["results"][-1]["at"]
                started = time.perf_counter()
                ack = await socket.call("room.search", d)
                found[kind].append((time.perf_counter() - started) * 1000)
                assert ack["ok"], ack
                results[kind].append(len(ack["d"]["results"]))
    finally:
        await socket.close()
    every = [ms for kind in found.values() for ms in kind]
    return {
        "all": percentiles(every),
        **{kind: {**percentiles(ms), "results_median": statistics.median(results[kind])} for kind, ms in found.items()},
    }


def upload_rate(server, session: str, count: int, at_once: int = 4) -> dict:
    body = b"\x89PNG\r\n\x1a\n" + random.Random(3).randbytes(MIB - 8)
    csrf = "c" * 32
    headers = {
        "Cookie": f"sessionid={session}; csrftoken={csrf}",
        "X-CSRFToken": csrf,
        "Content-Type": "image/png",
        "Upload-Filename": "one-mib.png",
    }

    def one(_: int) -> float:
        started = time.perf_counter()
        status, _, answer = server.request(
            "POST", "/api/uploads", body, {**headers, "Idempotency-Key": uuid.uuid4().hex}
        )
        assert status == 201, answer
        return (time.perf_counter() - started) * 1000

    started = time.perf_counter()
    with ThreadPoolExecutor(at_once) as pool:
        ms = list(pool.map(one, range(count)))
    seconds = time.perf_counter() - started
    return {
        # One MiB each: uploads/s is MiB/s.
        "mib_per_s": round(count / seconds, 1),
        "at_once": at_once,
        **percentiles(ms),
    }


def search_bench(args, start, base: dict[str, str], out: Path) -> dict:
    """Seed, then measure; the result for the report's `search`."""
    began = time.perf_counter()
    seed_room(args.database, args.search_messages)
    seeded = round(time.perf_counter() - began, 1)
    media = out / "media"
    servers = start(
        "full+MESSAGING_UPLOADS_PENDING_PER_USER=1000000+MESSAGING_UPLOADS_PENDING_BYTES_PER_USER=1000000000000"
        f"+MEDIA_ROOT={media}"
    )
    try:
        session = sign_in(servers[0].url, f"searcher-{uuid.uuid4().hex[:6]}")
        latency = asyncio.run(search_latency(servers[0].url, session, args.search_queries))
        uploads = upload_rate(servers[0], session, args.uploads)
    finally:
        for server in servers:
            server.stop()
    counts = holding(args.database, [k for k in BANDS if k != "second page of the commonest word"], random.Random(5))
    for kind, count in counts.items():
        latency[kind]["messages_holding_the_words"] = count
    found = {"messages": args.search_messages, "seed_seconds": seeded, "search": latency, "uploads_1_mib": uploads}
    (out / "search.json").write_text(json.dumps(found, indent=2))
    return found
