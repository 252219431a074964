"""Rooms and people across two daphne processes: invitations, typing and
presence reach every process; a process killed takes its users offline; a
stranger's `dm.open` of an admin is a request that tells them nothing."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from asgiref.sync import sync_to_async

from messaging.testing import SocketClient as WsClient
from messaging_client import sign_in

pytestmark = [pytest.mark.e2e]


async def user_id(ws: WsClient, name: str) -> int:
    """The user of `ws`, from its own entry in a join ack of a room of its own."""
    ack = await ws.call("room.join", {"room": f"own-{name}"})
    return ack["d"]["members"][0]["user"]


async def frame(ws: WsClient, kind: str, timeout: float = 15) -> dict:
    """The next frame of type `kind` (from the inbox first)."""
    for n, f in enumerate(ws.inbox):
        if f["t"] == kind:
            return ws.inbox.pop(n)
    deadline = time.monotonic() + timeout
    while True:
        f = await ws.receive(max(0.1, deadline - time.monotonic()))
        if f["t"] == kind:
            return f
        ws.inbox.append(f)


async def test_an_invitation_reaches_the_users_sockets_on_both_processes(start_daphne):
    a, b = start_daphne(), start_daphne()
    ana = await WsClient(a.url, await sync_to_async(sign_in)(a.url, "ana")).connect()
    bob_session = await sync_to_async(sign_in)(b.url, "bob")
    bobs = [await WsClient(server.url, bob_session).connect() for server in (a, b)]
    try:
        bob = await user_id(bobs[1], "bob")
        assert (await ana.call("room.create", {"room": "secret", "private": True}))["ok"]
        assert (await bobs[1].call("room.join", {"room": "secret"}))["error"]["code"] == "forbidden"
        assert (await ana.call("room.invite", {"room": "secret", "user": bob}))["ok"]
        for ws in bobs:
            invited = await frame(ws, "invited")
            assert invited["d"]["room"] == "secret" and invited["d"]["by"]["name"] == "ana"
        for ws in (ana, bobs[1]):
            assert (await ws.call("room.join", {"room": "secret"}))["ok"]
        assert (await bobs[1].call("room.post", {"room": "secret", "body": "hi from b"}))["ok"]
        assert (await ana.messages_until("secret", 1))[1]["d"]["body"] == "hi from b"
        # Typing crosses processes too, and not back to the typist.
        assert (await ana.call("typing", {"room": "secret", "typing": True}))["ok"]
        typing = await frame(bobs[1], "typing")
        assert typing["d"]["typing"] is True and typing["d"]["name"] == "ana"
        # Removal on one process unsubscribes the member's socket on the other.
        assert (await ana.call("room.remove", {"room": "secret", "user": bob}))["ok"]
        left = await frame(bobs[1], "room.left")
        assert left["d"]["by"]["name"] == "ana"
        assert (await ana.call("room.post", {"room": "secret", "body": "gone"}))["ok"]
        await ana.messages_until("secret", 2)
        with pytest.raises(asyncio.TimeoutError):
            while True:
                f = await bobs[1].receive(timeout=1)
                assert f["t"] != "msg", f
    finally:
        for ws in (ana, *bobs):
            await ws.close()


async def test_a_killed_process_takes_its_users_offline_within_30_seconds(start_daphne):
    a, b = start_daphne(), start_daphne()
    bob = await WsClient(b.url, await sync_to_async(sign_in)(b.url, "bob")).connect()
    ana = await WsClient(a.url, await sync_to_async(sign_in)(a.url, "ana")).connect()
    try:
        assert (await bob.call("room.join", {"room": "lobby"}))["ok"]
        ack = await ana.call("room.join", {"room": "lobby"})
        ana_id = next(m["user"] for m in ack["d"]["members"] if m["name"] == "ana")
        members = (await bob.call("room.members", {"room": "lobby"}))["d"]["members"]
        assert {m["user"]: m["online"] for m in members}[ana_id] is True
        bob.inbox.clear()
        a.kill()
        killed = time.monotonic()
        offline = await frame(bob, "presence", timeout=30)
        assert offline["d"] == {"room": "lobby", "user": ana_id, "online": False}
        assert time.monotonic() - killed <= 30
        members = (await bob.call("room.members", {"room": "lobby"}))["d"]["members"]
        assert {m["user"]: m["online"] for m in members}[ana_id] is False
    finally:
        await bob.close()


def make_admin(display_name: str, username: str) -> int:
    """The guest signed in as `display_name` made an admin as `createsuperuser` makes
    one: an account name, no display name. Its id."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(first_name=display_name)
    user.username, user.first_name, user.is_staff, user.is_superuser = username, "", True, True
    user.save(update_fields=["username", "first_name", "is_staff", "is_superuser"])
    return user.pk


async def everything_until_quiet(ws: WsClient, quiet: float = 2) -> list[dict]:
    """The inbox and every frame that arrives until none has for `quiet` seconds."""
    frames, ws.inbox = ws.inbox, []
    with pytest.raises(asyncio.TimeoutError):
        while True:
            frames.append(await ws.receive(timeout=quiet))
    return frames


async def test_a_stranger_who_opens_a_conversation_with_an_admin_learns_nothing_and_makes_no_member(start_daphne):
    from messaging.models import Invitation, Membership

    a, b = start_daphne(), start_daphne()
    admin_session = await sync_to_async(sign_in)(b.url, "soon an admin")
    admin_id = await sync_to_async(make_admin)("soon an admin", "root-operator")
    admins = [await WsClient(server.url, admin_session).connect() for server in (a, b)]
    mallory_session = await sync_to_async(sign_in)(a.url, "mallory")
    mallory = await WsClient(a.url, mallory_session).connect()
    mallory_on_b = await WsClient(b.url, mallory_session).connect()
    said: list[dict] = []  # every ack and frame mallory got

    async def call(ws: WsClient, t: str, d: dict) -> dict:
        ack = await ws.call(t, d)
        said.append(ack)
        return ack

    try:
        # The admin is about: in a room, reading, posting.
        for ws in admins:
            assert (await ws.call("room.join", {"room": "ops-desk"}))["ok"]
        # Ids are sequential: mallory opens a conversation with the admin's.
        opened = await call(mallory, "dm.open", {"user": admin_id})
        assert opened["ok"], opened
        room = opened["d"]["room"]
        assert opened["d"]["with"] == {"id": admin_id, "name": f"user {admin_id}"}
        for ws in admins:
            invited = await frame(ws, "invited")
            assert invited["d"]["room"] == room and invited["d"]["by"]["name"] == "mallory"
        # An invitation, not a membership: mallory's room has mallory alone.
        assert await Membership.objects.filter(room__slug=room, user_id=admin_id).acount() == 0
        joined = await call(mallory, "room.join", {"room": room})
        assert joined["d"]["members_total"] == 1 and admin_id not in [m["user"] for m in joined["d"]["members"]]
        members = await call(mallory, "room.members", {"room": room})
        assert admin_id not in [m["user"] for m in members["d"]["members"]]
        # The admin goes offline and comes back, reads and types elsewhere: mallory hears none of it.
        for ws in admins:
            await ws.close()
        admins = [await WsClient(server.url, admin_session).connect() for server in (a, b)]
        for ws in admins:
            assert (await ws.call("room.join", {"room": "ops-desk"}))["ok"]
        assert (await admins[0].call("room.post", {"room": "ops-desk", "body": "on duty"}))["ok"]
        assert (await admins[1].call("receipt", {"room": "ops-desk", "read": 1}))["ok"]
        assert (await admins[1].call("typing", {"room": "ops-desk", "typing": True}))["ok"]
        # The admin declines, on process a; every socket of theirs is told.
        declined = await admins[0].call("room.leave", {"room": room})
        assert declined["ok"], declined
        for ws in admins:
            assert (await frame(ws, "room.left"))["d"] == {"room": room, "user": admin_id, "by": None}
        # A second open, on the other process, asks no more.
        again = await call(mallory_on_b, "dm.open", {"user": admin_id})
        assert again["ok"] and again["d"]["room"] == room
        for ws in admins:
            assert not [f for f in await everything_until_quiet(ws) if f["t"] == "invited"]
        assert await Membership.objects.filter(room__slug=room, user_id=admin_id).acount() == 0
        invitation = await Invitation.objects.aget(room__slug=room, user_id=admin_id)
        assert invitation.declined_at is not None
        # Nothing of the admin reached mallory: no account name, no presence, no watermarks, no online.
        said.extend(await everything_until_quiet(mallory) + await everything_until_quiet(mallory_on_b))
        assert "root-operator" not in json.dumps(said)
        about_admin = [f for f in said if f.get("t") in ("presence", "status", "typing", "msg")]
        assert about_admin == []
        assert not [
            m
            for ack in said
            if ack.get("t") == "ack" and ack.get("ok")
            for m in ack["d"].get("members", [])
            if m["user"] == admin_id
        ]
    finally:
        for ws in (mallory, mallory_on_b, *admins):
            await ws.close()
