"""No frame, ack or event shows a user's account name (`username`) to anyone but
that user; a user with no display name is shown as `user <id>` (PROTOCOL.md 1.2).
Every place a name goes out, for an account made as an admin's is: a username
and no display name."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from messaging.events.models import Event

pytestmark = [pytest.mark.django_db(transaction=True)]

ACCOUNT = "root-admin-account"


@database_sync_to_async
def account_without_display_name():
    return get_user_model().objects.create_user(username=ACCOUNT, is_staff=True)


async def test_a_user_without_a_display_name_is_user_and_id_everywhere(make_user, open_clients):
    admin = await open_clients(await account_without_display_name())
    ana = await open_clients(await make_user("ana"))
    shown = {"id": admin.user.pk, "name": f"user {admin.user.pk}"}
    # Every ack and frame either socket read, for the last check.
    seen: list[dict] = []

    async def call(client, t: str, d: dict) -> dict:
        ack = await client.call(t, d)
        assert ack["ok"], ack
        seen.append(ack)
        return ack["d"]

    async def frame(client, t: str) -> dict:
        [found] = await client.frames(t, 1)
        seen.append(found)
        return found

    # A stranger opens a direct conversation with the admin: the ack's `with`.
    dm = await call(ana, "dm.open", {"user": admin.user.pk})
    assert dm["with"] == shown
    # The admin's own room: the invitation's `by`, members' entries, a message's sender, typing.
    await call(admin, "room.create", {"room": "ops", "private": True})
    await call(admin, "room.invite", {"room": "ops", "user": ana.user.pk})
    invited = await frame(ana, "invited")
    assert invited["d"]["by"] == shown
    assert [r["by"] for r in (await call(ana, "rooms.list", {}))["rooms"] if r["room"] == "ops"] == [shown]
    await call(admin, "room.join", {"room": "ops"})
    members = (await call(ana, "room.join", {"room": "ops"}))["members"]
    assert {m["user"]: m["name"] for m in members}[admin.user.pk] == shown["name"]
    paged = (await call(ana, "room.members", {"room": "ops"}))["members"]
    assert {m["user"]: m["name"] for m in paged}[admin.user.pk] == shown["name"]
    await call(admin, "room.post", {"room": "ops", "body": "hello"})
    live = await frame(ana, "msg")
    assert live["d"]["sender"] == shown
    history = (await call(ana, "room.history", {"room": "ops", "before": 2}))["messages"]
    assert history[0]["sender"] == shown
    await call(admin, "typing", {"room": "ops", "typing": True})
    typing = await frame(ana, "typing")
    assert typing["d"]["name"] == shown["name"]
    # The admin's own direct room, accepted: the other side's list says `with` the admin.
    await call(admin, "room.join", {"room": dm["room"]})
    assert [r["with"] for r in (await call(ana, "rooms.list", {}))["rooms"] if r["room"] == dm["room"]] == [shown]
    # A removal's `by`.
    await call(admin, "room.remove", {"room": "ops", "user": ana.user.pk})
    left = await frame(ana, "room.left")
    assert left["d"]["by"] == shown
    # The events downstream carry the sender's name as the frame does.
    event = await Event.objects.filter(room="ops", type="message.posted").aget()
    assert event.data["sender"]["name"] == shown["name"]
    # Nowhere the account name: not in anything either socket read, not in the event.
    assert ACCOUNT not in json.dumps([*seen, *ana.inbox, *admin.inbox, event.data])
