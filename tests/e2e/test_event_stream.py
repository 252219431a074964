"""`GET /api/stream` (PROTOCOL.md 1.2, "Server-sent events") on real daphne and uvicorn processes."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import urlsplit

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from messaging.models import Membership, Room
from messaging.transport.events import encode_cursor
from messaging.transport.tokens import create_token
from messaging_client import Client

from ..support.archives import archive

pytestmark = [pytest.mark.e2e]


@pytest.fixture(params=["daphne", "uvicorn"])
def start(request, start_daphne, start_uvicorn):
    return start_daphne if request.param == "daphne" else start_uvicorn


def user_with_token(name: str) -> str:
    user = get_user_model().objects.create_user(username=name, first_name=name)
    return create_token(user, "e2e")[1]


class Stream:
    """One `GET /api/stream` over a plain socket: its status, headers and events as they come."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""
        self.chunked = False
        self.comments: list[str] = []

    @classmethod
    async def open(cls, url: str, path: str, token: str | None, **headers: str) -> Stream:
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        lines = [f"GET {path} HTTP/1.1", f"Host: {parts.netloc}"]
        if token:
            lines.append(f"Authorization: Bearer {token}")
        lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        stream = cls(reader, writer)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        status_line, *header_lines = head.decode("latin1").split("\r\n")
        stream.status = int(status_line.split()[1])
        for line in header_lines:
            if line:
                name, _, value = line.partition(":")
                stream.headers[name.strip().lower()] = value.strip()
        stream.chunked = stream.headers.get("transfer-encoding") == "chunked"
        return stream

    async def chunk(self) -> bytes:
        if not self.chunked:
            return await self.reader.read(65536)
        size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
        data = await self.reader.readexactly(size + 2)
        return data[:-2] if size else b""

    async def whole(self) -> bytes:
        """The body of a response that is no stream."""
        if "content-length" in self.headers:
            return await self.reader.readexactly(int(self.headers["content-length"]))
        body = b""
        while data := await asyncio.wait_for(self.chunk(), 30):
            body += data
        return body

    async def event(self, timeout: float = 30) -> dict[str, str] | None:
        """The next event (its fields), or None once the response ends."""
        while b"\n\n" not in self.body:
            data = await asyncio.wait_for(self.chunk(), timeout)
            if not data:
                return None
            self.body += data
        block, self.body = self.body.split(b"\n\n", 1)
        fields: dict[str, str] = {}
        for line in block.decode().split("\n"):
            if line.startswith(":"):
                self.comments.append(line)
                continue
            name, _, value = line.partition(": ")
            fields[name] = value
        return fields if fields else await self.event(timeout)

    async def frames(self, t: str, count: int) -> list[dict]:
        got = []
        while len(got) < count:
            fields = await self.event()
            assert fields is not None, f"the stream ended after {got}"
            if fields["event"] == t:
                got.append(json.loads(fields["data"]))
        return got

    def close(self) -> None:
        self.writer.close()


@pytest.fixture
async def streams():
    opened: list[Stream | Client] = []

    async def open_stream(url, path, token, **headers) -> Stream:
        stream = await Stream.open(url, path, token, **headers)
        opened.append(stream)
        return stream

    async def open_client(*args, **kwargs) -> Client:
        client = Client(*args, **kwargs)
        opened.append(client)
        return await client.start()

    open_stream.client = open_client
    yield open_stream
    for item in opened:
        if isinstance(item, Stream):
            item.close()
        else:
            await item.close()


async def test_a_stream_answers_its_headers_a_ready_event_then_every_frame_with_a_cursor(start, streams):
    server = start()
    ana, bob = await sync_to_async(user_with_token)("ana"), await sync_to_async(user_with_token)("bob")
    stream = await streams(server.url, "/api/stream?rooms=lobby,dev", ana)
    assert stream.status == 200
    assert stream.headers["content-type"] == "text/event-stream"
    assert stream.headers["cache-control"] == "no-cache" and stream.headers["x-accel-buffering"] == "no"
    ready = await stream.event()
    assert ready["event"] == "ready"
    rooms = json.loads(ready["data"])["rooms"]
    assert [r["room"] for r in rooms] == ["lobby", "dev"] and all("last_rev" in r for r in rooms)
    bob_client = await streams.client(server.url, token=bob)
    await bob_client.join("dev")
    await bob_client.post("dev", "over the stream")
    fields = await stream.event()
    while fields["event"] != "msg":
        fields = await stream.event()
    frame = json.loads(fields["data"])
    assert frame["t"] == "msg" and frame["d"]["body"] == "over the stream" and "\n" not in fields["data"]
    assert fields["id"]


async def test_a_post_on_one_process_reaches_a_stream_on_another_once_across_socket_http_and_stream(
    start_daphne, start_uvicorn, streams
):
    a, b = start_daphne(), start_uvicorn()
    ana, bob = await sync_to_async(user_with_token)("ana"), await sync_to_async(user_with_token)("bob")
    stream = await streams(b.url, "/api/stream?rooms=lobby", bob)
    assert (await stream.event())["event"] == "ready"
    ana_client = await streams.client(a.url, token=ana)
    await ana_client.join("lobby")
    await ana_client.post("lobby", "first", id="same-id")
    # The same (user, id) over HTTP on the other process: one command, one message.
    body = json.dumps({"t": "room.post", "d": {"room": "lobby", "body": "first"}})
    status, _, answer = await asyncio.to_thread(
        b.request,
        "POST",
        "/api/commands",
        body,
        {"Content-Type": "application/json", "Authorization": f"Bearer {ana}", "Idempotency-Key": "same-id"},
    )
    assert status == 200 and json.loads(answer)["dup"] is True
    await ana_client.post("lobby", "second")
    msgs = await stream.frames("msg", 2)
    assert [(m["d"]["seq"], m["d"]["body"]) for m in msgs] == [(1, "first"), (2, "second")]


async def test_a_resumed_stream_gets_exactly_the_frames_it_missed(start, streams):
    server = start()
    ana, bob = await sync_to_async(user_with_token)("ana"), await sync_to_async(user_with_token)("bob")
    bob_client = await streams.client(server.url, token=bob)
    await bob_client.join("lobby")
    await bob_client.post("lobby", "before")
    stream = await streams(server.url, "/api/stream?rooms=lobby", ana)
    await stream.event()
    [seen] = await stream.frames("msg", 1)
    assert seen["d"]["body"] == "before"
    fields = None
    await bob_client.post("lobby", "live")
    while fields is None or fields["event"] != "msg":
        fields = await stream.event()
    cursor = fields["id"]
    stream.close()
    await bob_client.post("lobby", "missed 1")
    await bob_client.post("lobby", "missed 2")
    again = await streams(server.url, "/api/stream?rooms=lobby", ana, Last_Event_ID=cursor)
    assert (await again.event())["event"] == "ready"
    await bob_client.post("lobby", "after")
    msgs = await again.frames("msg", 3)
    assert [m["d"]["body"] for m in msgs] == ["missed 1", "missed 2", "after"]
    # An unreadable cursor is ignored: what a join without `since` sends.
    fresh = await streams(server.url, "/api/stream?rooms=lobby&last_event_id=nonsense", ana)
    assert (await fresh.event())["event"] == "ready"
    assert [m["d"]["body"] for m in await fresh.frames("msg", 5)][:2] == ["before", "live"]


def rooms_and_members() -> tuple[list[str], int]:
    return sorted(Room.objects.values_list("slug", flat=True)), Membership.objects.count()


async def test_refused_streams_answer_400_401_403_and_change_nothing(start, streams):
    server = start()
    ana, bob = await sync_to_async(user_with_token)("ana"), await sync_to_async(user_with_token)("bob")
    owner = await streams.client(server.url, token=bob)
    await owner.submit("room.create", {"room": "secret", "private": True})
    before = await sync_to_async(rooms_and_members)()
    cases = [
        ("/api/stream", ana, {}, 400),
        ("/api/stream?rooms=", ana, {}, 400),
        ("/api/stream?rooms=" + ",".join(f"r{n}" for n in range(201)), ana, {}, 400),
        ("/api/stream?rooms=Bad_Slug", ana, {}, 400),
        ("/api/stream?rooms=lobby", None, {}, 401),
        ("/api/stream?rooms=lobby", "not-a-token", {}, 401),
        ("/api/stream?rooms=lobby,secret", ana, {}, 403),
        ("/api/stream?rooms=lobby", ana, {"Origin": "http://evil.example"}, 403),
        ("/api/stream?rooms=lobby", ana, {"Sec_Fetch_Site": "cross-site"}, 403),
    ]
    for path, token, headers, status in cases:
        stream = await streams(server.url, path, token, **headers)
        assert stream.status == status, path
        body = json.loads(await stream.whole())
        assert body["t"] == "error" and body["error"]["code"], path
    assert await sync_to_async(rooms_and_members)() == before


async def test_an_idle_stream_gets_a_ping_comment_every_stream_ping_interval(start, streams):
    server = start(MESSAGING_STREAM_PING_INTERVAL="0.3")
    ana = await sync_to_async(user_with_token)("ana")
    stream = await streams(server.url, "/api/stream?rooms=lobby", ana)
    assert (await stream.event())["event"] == "ready"
    while stream.body.count(b": ping\n\n") < 2:
        stream.body += await asyncio.wait_for(stream.chunk(), 30)


def revoke(token: str) -> None:
    from messaging.models import ApiToken
    from messaging.transport.tokens import digest

    ApiToken.objects.get(digest=digest(token)).revoke()


async def test_a_stream_whose_token_is_revoked_ends_and_another_users_goes_on(start, streams):
    server = start(MESSAGING_SESSION_CHECK_INTERVAL="0.3")
    ana, bob = await sync_to_async(user_with_token)("ana"), await sync_to_async(user_with_token)("bob")
    ana_stream = await streams(server.url, "/api/stream?rooms=lobby", ana)
    bob_stream = await streams(server.url, "/api/stream?rooms=lobby", bob)
    for stream in (ana_stream, bob_stream):
        assert (await stream.event())["event"] == "ready"
    await sync_to_async(revoke)(ana)
    while (fields := await ana_stream.event()) is not None:
        assert fields["event"] != "msg"
    # The revoked token opens no stream; the other user's still hears the room.
    assert (await streams(server.url, "/api/stream?rooms=lobby", ana)).status == 401
    poster = await streams.client(server.url, token=bob)
    await poster.join("lobby")
    await poster.post("lobby", "still here")
    [msg] = await bob_stream.frames("msg", 1)
    assert msg["d"]["body"] == "still here"


def archive_of(slug: str, username: str, bodies: list[str]) -> None:
    archive(slug, get_user_model().objects.get(username=username), bodies)


async def test_a_resume_larger_than_the_hold_comes_in_pages_each_change_once_then_live(start, streams):
    # 400 messages of 4,000 characters: 1.6 MB to resume from rev 0, more than the 1 MB
    # (MAX_SEND_BUFFER) a stream holds before `ready`, and a replay's 500 KB page.
    server = start()
    ana, bob = await sync_to_async(user_with_token)("ana"), await sync_to_async(user_with_token)("bob")
    await sync_to_async(archive_of)("archive", "ana", [f"{n:04} " + "x" * 3995 for n in range(1, 401)])
    stream = await streams(server.url, "/api/stream?rooms=archive", ana, Last_Event_ID=encode_cursor(["archive"], [0]))
    ready = await stream.event()
    assert ready["event"] == "ready" and ready["id"] == encode_cursor(["archive"], [0])
    [joined] = json.loads(ready["data"])["rooms"]
    assert joined["last_rev"] == 400 and joined["rev_upto"] < 400
    msgs = await stream.frames("msg", 400)
    assert [m["d"]["seq"] for m in msgs] == list(range(1, 401))
    bob_client = await streams.client(server.url, token=bob)
    await bob_client.join("archive")
    await bob_client.post("archive", "live")
    fields = await stream.event()
    while fields["event"] != "msg":
        fields = await stream.event()
    assert json.loads(fields["data"])["d"]["body"] == "live" and fields["id"] == encode_cursor(["archive"], [401])


async def test_a_first_join_larger_than_the_hold_is_sent_after_ready(start, streams):
    # The 50 latest messages, each 4,000 control characters (24 kB of JSON): 1.2 MB, more than the hold.
    server = start()
    ana = await sync_to_async(user_with_token)("ana")
    await sync_to_async(archive_of)("noisy", "ana", ["\x01" * 4000] * 60)
    await sync_to_async(archive_of)("calm", "ana", ["hello"] * 3)
    stream = await streams(server.url, "/api/stream?rooms=noisy,calm", ana)
    ready = await stream.event()
    assert ready["event"] == "ready" and [r["room"] for r in json.loads(ready["data"])["rooms"]] == ["noisy", "calm"]
    msgs = await stream.frames("msg", 53)
    assert sorted((m["d"]["room"], m["d"]["seq"]) for m in msgs) == sorted(
        [("calm", n) for n in (1, 2, 3)] + [("noisy", n) for n in range(11, 61)]
    )
