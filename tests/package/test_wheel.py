"""The wheel, installed into a fresh virtual environment, works in a separate host project.

Built once per session from a clean copy of the sources. The fresh environment
gets `messaging` only from the wheel; for its dependencies it looks through a
`.pth` file at the test environment's site-packages, so `pip install
--no-index` checks the wheel's declared requirements against the pinned ones
without touching the network. That cannot notice an undeclared requirement,
so `test_every_import_is_a_declared_requirement` checks those from the source.
"""

from __future__ import annotations

import ast
import asyncio
import email
import importlib.metadata
import json
import sys
import uuid
import zipfile
from pathlib import Path

import redis
from packaging.requirements import Requirement

from messaging.testing import SocketClient
from messaging_client import sign_in
from tests.support.search_cases import CASES, CORPUS
from tests.support.servers import ROOT, Daphne
from tests.support.uploads import PNG, upload_headers
from tests.support.venvs import run


def test_wheel_carries_every_file_of_the_app(wheel):
    tracked = run("git", "ls-files", "messaging", cwd=ROOT).split()
    shipped = set(zipfile.ZipFile(wheel).namelist())
    assert [f for f in tracked if f not in shipped] == []
    assert {
        "messaging/py.typed",
        "messaging/migrations/0001_initial.py",
        "messaging/contrib/chat/templates/messaging/chat.html",
        "messaging/contrib/chat/static/messaging/chat.js",
    } <= shipped
    metadata = email.message_from_bytes(
        zipfile.ZipFile(wheel).read(next(n for n in shipped if n.endswith("/METADATA")))
    )
    import messaging

    assert metadata["Version"] == messaging.__version__


def test_wheel_declares_its_licence_and_ships_its_text(wheel):
    shipped = zipfile.ZipFile(wheel)
    metadata = email.message_from_bytes(shipped.read(next(n for n in shipped.namelist() if n.endswith("/METADATA"))))
    assert metadata["License-Expression"] == "BSD-3-Clause"
    assert metadata.get_all("License-File") == ["LICENSE"]
    [licence] = [n for n in shipped.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
    assert shipped.read(licence).decode() == (ROOT / "LICENSE").read_text()


def test_every_import_is_a_declared_requirement(wheel):
    metadata = email.message_from_bytes(
        zipfile.ZipFile(wheel).read(next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith("/METADATA")))
    )
    declared = {Requirement(r).name.lower().replace("_", "-") for r in metadata.get_all("Requires-Dist")}
    distributions = importlib.metadata.packages_distributions()
    imported = set()
    for path in (ROOT / "messaging").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = {m for m in imported if m not in sys.stdlib_module_names and m != "messaging"}
    needed = {distributions[m][0].lower().replace("_", "-") for m in third_party}
    assert needed - declared == set()


def test_the_app_comes_from_the_wheel(host, venv):
    python, project, env = host
    location = run(python, "-c", "import messaging; print(messaging.__file__)", cwd=project, env=env).strip()
    assert Path(location).is_relative_to(venv), location
    assert "No changes detected" in run(
        python, "manage.py", "makemigrations", "--check", "--dry-run", cwd=project, env=env
    )
    run(python, "manage.py", "check", "--fail-level", "WARNING", cwd=project, env=env)


async def test_websocket_round_trip_with_duplicates(host, tmp_path):
    python, project, env = host
    server = Daphne(env, log_dir=tmp_path, app="hostsite.asgi:application", python=python, cwd=project, base_env={})
    server.start()
    try:
        assert server.request("GET", "/hello/")[2] == b"the host project's own page"
        session = sign_in(server.url, "ana")
        a, b = await SocketClient(server.url, session).connect(), await SocketClient(server.url, session).connect()
        try:
            assert (await a.call("room.join", {"room": "lobby"}))["ok"]

            post = {"room": "lobby", "body": "hello from the wheel"}
            first = await a.call("room.post", post, id="w-1")
            again = await a.call("room.post", post, id="w-1")
            assert first["ok"] and first["dup"] is False and first["d"]["seq"] == 1
            assert again["dup"] is True and again["d"] == first["d"]

            # The host's own type, concurrently from two sockets: credited once.
            credits = await asyncio.gather(*(ws.call("wallet.credit", {"amount": 5}, id="c-1") for ws in (a, b)))
            assert sorted(ack["dup"] for ack in credits) == [False, True]
            assert {ack["d"]["balance"] for ack in credits} == {5}
            bad = await a.call("wallet.credit", {"amount": 0})
            assert bad["error"]["code"] == "invalid"
            assert (await a.call("wallet.credit", {"amount": 2}))["d"] == {"balance": 7}

            liked = await a.call("reaction.add", {"room": "lobby", "seq": 1})
            assert liked["d"] == {"room": "lobby", "seq": 1, "count": 1}
        finally:
            await a.close()
            await b.close()
        assert server.request("GET", "/healthz")[0] == 200
        status, _, body = server.request("GET", "/metrics", headers={"Authorization": "Bearer host-metrics-token"})
        assert status == 200 and b'messaging_commands_total{outcome="dup",type="wallet.credit"} 1.0' in body
    finally:
        server.stop()


def found_in_sqlite(path: str, text: str) -> set[str]:
    """`table.column` of every column of every table of the SQLite file where a row holds `text`
    (SQLite's own catalogue; any column, as SQLite keeps any type anywhere)."""
    import sqlite3

    found = set()
    with sqlite3.connect(path) as db:
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            for column in [row[1] for row in db.execute(f'PRAGMA table_info("{table}")')]:
                if db.execute(
                    f'SELECT EXISTS (SELECT 1 FROM "{table}" WHERE CAST("{column}" AS TEXT) LIKE ?)', [f"%{text}%"]
                ).fetchone()[0]:
                    found.add(f"{table}.{column}")
    return found


async def test_a_deleted_body_is_in_no_table_of_the_sqlite_database(host, tmp_path):
    """PROTOCOL.md 1.2, "Deleted means gone", on the portable path: the host's SQLite database keeps
    its events too, and after the delete no column of any table holds the body."""
    python, project, env = host
    server = Daphne(env, log_dir=tmp_path, app="hostsite.asgi:application", python=python, cwd=project, base_env={})
    server.start()
    marker = f"gone-{uuid.uuid4().hex}"
    try:
        ana = await SocketClient(server.url, sign_in(server.url, "ana")).connect()
        try:
            assert (await ana.call("room.join", {"room": "gone"}))["ok"]
            seq = (await ana.call("room.post", {"room": "gone", "body": marker}))["d"]["seq"]
            assert (await ana.call("message.edit", {"room": "gone", "seq": seq, "body": f"{marker} edited"}))["ok"]
            assert {"messaging_message.body", "messaging_event.data"} <= found_in_sqlite(env["HOST_DATABASE"], marker)
            assert (await ana.call("message.delete", {"room": "gone", "seq": seq}))["ok"]
        finally:
            await ana.close()
        assert found_in_sqlite(env["HOST_DATABASE"], marker) == set()
    finally:
        server.stop()


async def test_users_keyed_by_uuid_on_postgresql(uuid_host, tmp_path):
    """Posts (the one statement, alone and in batches), duplicates, receipts and
    reactions with user ids that are UUIDs: nothing may take them for integers."""
    python, project, env = uuid_host
    assert "No changes detected" in run(
        python, "manage.py", "makemigrations", "--check", "--dry-run", cwd=project, env=env
    )
    server = Daphne(env, log_dir=tmp_path, app="hostsite.asgi:application", python=python, cwd=project, base_env={})
    server.start()
    try:
        ana = await SocketClient(server.url, sign_in(server.url, "ana")).connect()
        bea = await SocketClient(server.url, sign_in(server.url, "bea")).connect()
        try:
            assert (await ana.call("room.join", {"room": "uuid-room"}))["ok"]
            joined = await bea.call("room.join", {"room": "uuid-room"})
            members = {m["name"]: m["user"] for m in joined["d"]["members"]}
            assert set(members) == {"ana", "bea"} and all(isinstance(uuid.UUID(u), uuid.UUID) for u in members.values())

            post = {"room": "uuid-room", "body": "one"}
            first = await ana.call("room.post", post, id="u-1")
            again = await ana.call("room.post", post, id="u-1")
            assert first["ok"] and first["dup"] is False and first["d"]["seq"] == 1
            assert again["dup"] is True and again["d"] == first["d"]
            # Redis forgot it: the statement fails on the record's key, and the record answers.
            redis.Redis.from_url(env["REDIS_URL"]).flushdb()
            forgotten = await ana.call("room.post", post, id="u-1")
            assert forgotten["dup"] is True and forgotten["d"] == first["d"]

            # Sent without waiting, as an outbox resends: they run in batches of what arrived together.
            ids = [await ana.send("room.post", {"room": "uuid-room", "body": f"batched {n}"}) for n in range(2, 8)]
            acks = [await ana.ack(id) for id in ids]
            assert [a["d"]["seq"] for a in acks] == list(range(2, 8)), acks
            seen = await bea.messages_until("uuid-room", 7)
            assert {f["d"]["sender"]["id"] for f in seen.values()} == {members["ana"]}

            marks = await bea.call("receipt", {"room": "uuid-room", "delivered": 7, "read": 7})
            assert marks["d"] == {"room": "uuid-room", "delivered": 7, "read": 7}
            while sum(f["t"] == "state" for f in ana.inbox) < 14 or not any(f["t"] == "status" for f in ana.inbox):
                ana.inbox.append(await ana.receive())
            assert next(f for f in ana.inbox if f["t"] == "status")["d"]["user"] == members["bea"]
            # Each of her messages told to its sender (the function's arrays of UUID senders).
            told = [(f["d"]["seq"], f["d"]["state"]) for f in ana.inbox if f["t"] == "state"]
            assert told == [(seq, "delivered") for seq in range(1, 8)] + [(seq, "read") for seq in range(1, 8)]

            first, last = sorted(members.values())
            page = await bea.call("room.members", {"room": "uuid-room", "after": first})
            assert [m["user"] for m in page["d"]["members"]] == [last] and page["d"]["more"] is False
            refused = await bea.call("room.members", {"room": "uuid-room", "after": 1})
            assert refused["error"]["code"] == "invalid", refused

            liked = await bea.call("reaction.add", {"room": "uuid-room", "seq": 3})
            assert liked["d"] == {"room": "uuid-room", "seq": 3, "count": 1}
        finally:
            await ana.close()
            await bea.close()
        # Save a busy machine's loop stalls (messaging.ops.loopwatch), nothing is logged as a warning or an error.
        logged = [line for line in server.log().splitlines() if "messaging.ops.loopwatch" not in line]
        assert not [line for line in logged if "WARNING" in line or "ERROR" in line], server.log()
    finally:
        server.stop()


async def test_search_and_files_on_the_portable_path_of_sqlite(host, tmp_path):
    """PROTOCOL.md 1.2, "Threads, reactions, files, search", on SQLite: the FTS5 table finds what
    PostgreSQL's index finds (tests/support/search_cases.py), kept current by edits and deletes, and
    a post with a file, fetched by a member, goes with its delete."""
    python, project, env = host
    server = Daphne(env, log_dir=tmp_path, app="hostsite.asgi:application", python=python, cwd=project, base_env={})
    server.start()
    room = f"words-{uuid.uuid4().hex[:8]}"
    try:
        session = sign_in(server.url, "ana")
        ana = await SocketClient(server.url, session).connect()
        try:
            assert (await ana.call("room.join", {"room": room}))["ok"]
            for body in CORPUS:
                assert (await ana.call("room.post", {"room": room, "body": body}))["ok"]
            for q, seqs in CASES.items():
                found = await ana.call("room.search", {"q": q, "room": room})
                assert [r["seq"] for r in found["d"]["results"]] == seqs, q
            assert (await ana.call("message.edit", {"room": room, "seq": 1, "body": "rewritten entirely"}))["ok"]
            assert (await ana.call("message.delete", {"room": room, "seq": 2}))["ok"]
            assert (await ana.call("room.search", {"q": "hello", "room": room}))["d"]["results"] == []
            found = await ana.call("room.search", {"q": "rewritten", "room": room})
            assert [r["seq"] for r in found["d"]["results"]] == [1]

            # The session's credentials, with a CSRF token of the client's making (Django's double submit).
            signed_in = {"Cookie": f"sessionid={session}; csrftoken={'t' * 32}", "X-CSRFToken": "t" * 32}
            headers = upload_headers("cat.png", "image/png", None, signed_in)
            status, _, body = server.request("POST", "/api/uploads", PNG, headers)
            assert status == 201, body
            file = json.loads(body)
            posted = await ana.call("room.post", {"room": room, "body": "", "attachments": [file["upload"]]})
            assert posted["ok"], posted
            assert server.request("GET", file["url"], headers={"Cookie": f"sessionid={session}"})[2] == PNG
            assert (await ana.call("message.delete", {"room": room, "seq": posted["d"]["seq"]}))["ok"]
            assert server.request("GET", file["url"], headers={"Cookie": f"sessionid={session}"})[0] == 404
            assert not (project / "media" / "messaging" / "uploads" / file["upload"]).exists()
        finally:
            await ana.close()
    finally:
        server.stop()


async def test_threads_and_emoji_reactions_on_the_portable_path_of_sqlite(host, tmp_path):
    """PROTOCOL.md 1.2, "Threads, reactions, files, search", on SQLite: replies counted on their root,
    a reply to a reply refused, `room.thread` pages, an emoji once per user with the viewer's own."""
    python, project, env = host
    server = Daphne(env, log_dir=tmp_path, app="hostsite.asgi:application", python=python, cwd=project, base_env={})
    server.start()
    room = f"threads-{uuid.uuid4().hex[:8]}"
    try:
        ana = await SocketClient(server.url, sign_in(server.url, "ana")).connect()
        bob = await SocketClient(server.url, sign_in(server.url, "bob")).connect()
        try:
            for ws in (ana, bob):
                assert (await ws.call("room.join", {"room": room}))["ok"]
            root = (await ana.call("room.post", {"room": room, "body": "root"}))["d"]["seq"]
            reply = await bob.call("room.post", {"room": room, "body": "re", "reply_to": root})
            assert reply["ok"], reply
            refused = await ana.call("room.post", {"room": room, "body": "no", "reply_to": reply["d"]["seq"]})
            assert refused["error"]["code"] == "invalid", refused
            page = await ana.call("room.thread", {"room": room, "seq": root})
            assert page["d"]["root"]["replies"] == 1 and [m["body"] for m in page["d"]["replies"]] == ["re"]
            d = {"room": room, "seq": root, "emoji": "👍", "on": True}
            once = await ana.call("reaction.set", d, id="same-id")
            assert once["d"]["count"] == 1
            again = await ana.call("reaction.set", d, id="same-id")
            assert again["dup"] and again["d"] == once["d"]
            assert (await bob.call("reaction.set", d))["d"]["count"] == 2
            history = await bob.call("room.history", {"room": room, "before": 10})
            first = history["d"]["messages"][0]
            assert first["reactions"] == {"👍": 2} and first["mine"] == ["👍"] and first["replies"] == 1
        finally:
            await ana.close()
            await bob.close()
    finally:
        server.stop()
