"""Files and search (PROTOCOL.md 1.2) against real daphne processes on one PostgreSQL, Redis and storage folder."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from messaging.files.models import Upload
from messaging.models import Message
from messaging.testing import SocketClient
from messaging.transport.tokens import create_token

from ..support.uploads import PDF, PNG, upload_headers

pytestmark = [pytest.mark.e2e]


def user_with_token(name: str) -> tuple[object, str]:
    user = get_user_model().objects.create_user(username=name, first_name=name)
    return user, create_token(user, "e2e")[1]


def upload(server, token: str, body: bytes, name: str = "cat.png", content_type: str = "image/png", key=None):
    headers = upload_headers(name, content_type, key, {"Authorization": f"Bearer {token}"})
    status, response_headers, content = server.request("POST", "/api/uploads", body, headers)
    return status, json.loads(content), response_headers


def fetch(server, token: str, url: str) -> tuple[int, bytes]:
    status, _, content = server.request("GET", url, headers={"Authorization": f"Bearer {token}"})
    return status, content


def command(server, token: str, t: str, d: dict, key: str | None = None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    if key:
        headers["Idempotency-Key"] = key
    status, _, body = server.request("POST", "/api/commands", json.dumps({"t": t, "d": d}), headers)
    return status, json.loads(body)


def media_of(server) -> Path:
    return Path(server.env["MEDIA_ROOT"]) / "messaging" / "uploads"


async def test_one_upload_key_sent_to_two_processes_at_once_keeps_one_upload(start_daphne):
    servers = [start_daphne(), start_daphne()]
    _, token = await sync_to_async(user_with_token)("ana")
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: upload(servers[i % 2], token, PNG, key="one-key"), range(8)))
    assert sorted(status for status, _, _ in answers) == [200] * 7 + [201], answers
    assert len({json.dumps(body) for _, body, _ in answers}) == 1
    assert all(headers.get("idempotent-replayed") == "true" for status, _, headers in answers if status == 200)
    assert await sync_to_async(Upload.objects.count)() == 1
    assert [p.name for p in media_of(servers[0]).iterdir()] == [answers[0][1]["upload"]]


async def test_a_post_with_files_sent_to_both_processes_at_once_is_one_message(start_daphne):
    servers = [start_daphne(), start_daphne()]
    _, token = await sync_to_async(user_with_token)("ana")
    assert command(servers[0], token, "room.join", {"room": "lobby"})[0] == 200
    file = upload(servers[0], token, PDF, "notes.pdf", "application/pdf")[1]
    d = {"room": "lobby", "body": "", "attachments": [file["upload"]]}
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda i: command(servers[i % 2], token, "room.post", d, "post-key"), range(6)))
    assert [status for status, _ in answers] == [200] * 6, answers
    assert sorted(ack["dup"] for _, ack in answers) == [False] + [True] * 5
    assert len({json.dumps(ack["d"]) for _, ack in answers}) == 1
    rows = await sync_to_async(lambda: list(Message.objects.values_list("seq", "attachments")))()
    assert rows == [(1, [{k: v for k, v in file.items() if k != "url"}])]


async def test_a_file_posted_on_one_process_reaches_members_on_the_other_and_no_one_else(start_daphne):
    a, b = start_daphne(), start_daphne()
    _, ana = await sync_to_async(user_with_token)("ana")
    _, bob = await sync_to_async(user_with_token)("bob")
    _, eve = await sync_to_async(user_with_token)("eve")
    file = upload(a, ana, PNG)[1]
    # Before it is posted: its uploader's alone.
    assert [fetch(server, who, file["url"])[0] for server, who in ((b, ana), (b, bob), (a, eve))] == [200, 404, 404]
    listener = await SocketClient(b.url, token=bob).connect()
    try:
        await listener.join("lobby")
        assert command(a, ana, "room.join", {"room": "lobby"})[0] == 200
        d = {"room": "lobby", "body": "a cat", "attachments": [file["upload"]]}
        status, ack = command(a, ana, "room.post", d, "p-1")
        assert status == 200, ack
        [msg] = await listener.frames("msg", 1)
        assert msg["d"]["attachments"] == [file]
    finally:
        await listener.close()
    assert fetch(b, bob, file["url"]) == (200, PNG)
    assert fetch(a, eve, file["url"])[0] == 404
    # Found by search, with its files, on either process.
    status, found = command(b, bob, "room.search", {"q": "cat"})
    assert status == 200 and [r["attachments"] for r in found["d"]["results"]] == [[file]]
    # Deleted: gone for everyone, from the storage too.
    assert command(b, ana, "message.delete", {"room": "lobby", "seq": 1}, "d-1")[0] == 200
    assert fetch(a, bob, file["url"])[0] == 404 and fetch(a, ana, file["url"])[0] == 404
    assert list(media_of(a).iterdir()) == []
    assert command(a, bob, "room.search", {"q": "cat"})[1]["d"]["results"] == []
