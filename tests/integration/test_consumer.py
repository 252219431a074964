"""The consumer's framing: every frame gets an answer or a defined close."""

from __future__ import annotations

import json

import pytest
from channels.layers import DEFAULT_CHANNEL_LAYER, get_channel_layer
from channels.testing import WebsocketCommunicator

from messaging.models import Room
from messaging.transport.consumers import ChatConsumer
from project.asgi import application

from .conftest import Client, rows

pytestmark = [pytest.mark.django_db(transaction=True)]


async def test_socket_without_a_signed_in_user_is_closed_with_4401():
    comm = WebsocketCommunicator(
        application, "/ws/", headers=[(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    )
    connected, _ = await comm.connect()
    assert connected
    assert await comm.receive_output() == {"type": "websocket.close", "code": 4401}


async def test_foreign_origin_is_refused():
    comm = WebsocketCommunicator(
        application, "/ws/", headers=[(b"origin", b"http://evil.example"), (b"host", b"127.0.0.1")]
    )
    connected, _ = await comm.connect()
    assert not connected


async def test_binary_frame_closes_with_1003(make_user, open_clients):
    client = await open_clients(await make_user())
    await client.comm.send_to(bytes_data=b"\x00\x01")
    assert await client.comm.receive_output() == {"type": "websocket.close", "code": 1003}


async def test_frame_over_the_limit_closes_with_1009(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "MAX_FRAME_BYTES": 1000}
    client = await open_clients(await make_user())
    await client.join("lobby")
    # 500 characters but 1500 bytes in UTF-8: the limit is in bytes.
    await client.send("room.post", {"room": "lobby", "body": "€" * 500})
    assert await client.comm.receive_output() == {"type": "websocket.close", "code": 1009}
    assert await rows() == []


async def test_frame_at_the_limit_is_processed(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "MAX_FRAME_BYTES": 200}
    client = await open_clients(await make_user())
    await client.join("lobby")
    frame = {"id": "at-limit", "t": "room.post", "d": {"room": "lobby", "body": ""}}
    frame["d"]["body"] = "x" * (200 - len(json.dumps(frame, separators=(",", ":"))))
    text = json.dumps(frame, separators=(",", ":"))
    assert len(text.encode()) == 200
    await client.send_raw(text)
    assert (await client.ack("at-limit"))["ok"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty frame"),
        ("hello", "not JSON"),
        ("[1, 2]", "a frame must be a JSON object"),
        ('{"t": "room.post", "d": {}}', "missing id"),
        ('{"id": "bad id", "t": "room.post"}', "id must be"),
        ('{"id": "x", "d": {"n": NaN}}', "not JSON"),
    ],
)
async def test_frame_without_a_valid_id_gets_bad_frame(make_user, open_clients, text, message):
    client = await open_clients(await make_user())
    await client.send_raw(text)
    frame = await client.receive()
    assert frame["t"] == "error" and frame["error"]["code"] == "bad_frame"
    assert frame["error"]["message"].startswith(message)
    # The socket still works.
    await client.join("lobby")


async def test_malformed_frames_in_a_row_close_with_1008(make_user, open_clients):
    client = await open_clients(await make_user())
    for _ in range(9):
        await client.send_raw("{")
        assert (await client.receive())["error"]["code"] == "bad_frame"
    await client.join("lobby")  # a good frame resets the count
    for _ in range(9):
        await client.send_raw("nope")
        assert (await client.receive())["t"] == "error"
    await client.send_raw("nope")
    assert (await client.receive())["t"] == "error"
    assert await client.comm.receive_output() == {"type": "websocket.close", "code": 1008}


@pytest.mark.parametrize(
    "t, d, code",
    [
        ("room.nope", {}, "unknown_type"),
        ("__init__", {}, "unknown_type"),
        (None, {}, "invalid"),
        (5, {}, "invalid"),
        ("room.join", None, "invalid"),
        ("room.join", [], "invalid"),
        ("room.join", {"room": "Bad Room"}, "invalid"),
        ("room.join", {"room": "lobby", "since": -1}, "invalid"),
        ("room.post", {"room": "lobby"}, "invalid"),
        ("room.post", {"room": "lobby", "body": "a\u0000b"}, "invalid"),
        ("room.post", {"room": "lobby", "body": "x" * 4001}, "invalid"),
        ("room.post", {"room": "lobby", "body": "hi"}, "forbidden"),
        ("receipt", {"room": "lobby"}, "invalid"),
        ("receipt", {"room": "lobby", "read": 1}, "forbidden"),
    ],
)
async def test_refusals_change_nothing(make_user, open_clients, t, d, code):
    client = await open_clients(await make_user())
    frame = {"id": "c1", "t": t}
    if d is not None:
        frame["d"] = d
    await client.send_raw(json.dumps(frame))
    ack = await client.ack("c1")
    assert ack["ok"] is False and ack["error"]["code"] == code and ack["error"]["retry"] is False
    assert ack["error"]["message"]
    assert await rows() == []
    assert not await Room.objects.filter(slug="lobby").aexists()


async def test_receipt_beyond_the_last_seq_is_invalid(make_user, open_clients):
    client = await open_clients(await make_user())
    await client.join("lobby")
    ack = await client.call("receipt", {"room": "lobby", "delivered": 1})
    assert ack["error"]["code"] == "invalid"


async def test_post_reaches_every_socket_in_the_room_including_the_senders_others(make_user, open_clients):
    ana = await make_user("ana")
    here, there = await open_clients(ana), await open_clients(ana)
    bob = await open_clients(await make_user("bob"))
    outsider = await open_clients(await make_user("eve"))
    for client in (here, there, bob):
        await client.join("lobby")
    await outsider.join("elsewhere")
    ack = await here.call("room.post", {"room": "lobby", "body": "hi all"}, id="m1")
    for client in (here, there, bob):
        (msg,) = await client.frames("msg", 1)
        assert msg["d"] == {
            "room": "lobby",
            "seq": 1,
            "id": "m1",
            "sender": {"id": ana.pk, "name": "ana"},
            "body": "hi all",
            "at": ack["d"]["at"],
            "version": 1,
            "rev": 1,
        }
    assert await outsider.nothing_more()


async def test_join_acks_members_then_sends_the_backlog(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    await ana.join("lobby")
    for n in range(3):
        await ana.call("room.post", {"room": "lobby", "body": f"m{n}"})
    bob = await open_clients(await make_user("bob"))
    ack = await bob.join("lobby")
    assert ack["d"]["room"] == "lobby" and ack["d"]["last_seq"] == 3
    assert [(m["name"], m["delivered"], m["read"]) for m in ack["d"]["members"]] == [("ana", 0, 0), ("bob", 0, 0)]
    # joined_seq (an extension): bob is a recipient of seq 4 onwards only.
    assert [m["joined_seq"] for m in ack["d"]["members"]] == [0, 3]
    backlog = await bob.frames("msg", 3)
    assert [m["d"]["seq"] for m in backlog] == [1, 2, 3]
    since = await bob.call("room.join", {"room": "lobby", "since": 2})
    assert since["ok"] and [m["joined_seq"] for m in since["d"]["members"]] == [0, 3]
    assert [m["d"]["seq"] for m in await bob.frames("msg", 1)] == [3]
    assert await bob.nothing_more()


async def test_broadcasts_leave_each_socket_in_seq_order(make_user, open_clients):
    # Fan-out runs in a task of its own per socket, off the command path: the
    # order of one sender's posts must survive it, for everyone in the room.
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    ids = [await ana.send("room.post", {"room": "lobby", "body": f"m{n}"}) for n in range(30)]
    acks = [await ana.ack(id) for id in ids]
    assert [a["d"]["seq"] for a in acks] == list(range(1, 31))
    for client in (ana, bob):
        frames = await client.frames("msg", 30)
        assert [f["d"]["seq"] for f in frames] == list(range(1, 31))
        assert [f["d"]["id"] for f in frames] == ids


async def test_a_socket_ends_cleanly_when_its_client_leaves(make_user, open_clients):
    # Without a channel layer the consumer awaits its frames itself instead of
    # channels' loop; a disconnect must still end it without an error.
    client = await open_clients(await make_user())
    await client.join("lobby")
    await client.comm.disconnect()
    assert client.comm.future.done() and client.comm.future.exception() is None


class NotedConsumer(ChatConsumer):
    """A host's subclass that also listens on the channel layer, as its docs allow."""

    channel_layer_alias = DEFAULT_CHANNEL_LAYER

    async def connect(self) -> None:
        await super().connect()
        await self.channel_layer.group_add("notes", self.channel_name)

    async def note(self, event: dict) -> None:
        await self.send_text(json.dumps({"t": "note", "d": {"text": event["text"]}}))


async def test_a_subclass_naming_a_channel_layer_hears_it_and_its_client(make_user):
    client = await Client(await make_user(), NotedConsumer).connect()
    try:
        await client.join("lobby")
        await get_channel_layer().group_send("notes", {"type": "note", "text": "hello"})
        assert (await client.frames("note", 1))[0]["d"] == {"text": "hello"}
        assert (await client.call("room.post", {"room": "lobby", "body": "after the note"}))["ok"]
    finally:
        await client.close()
    assert client.comm.future.exception() is None
