"""A private room is closed to non-members over `POST /api/commands` too: every command is 403 `forbidden`;
and invitations are requests there as on a socket (PROTOCOL.md 1.2)."""

from __future__ import annotations

import pytest

from messaging.models import Membership

from .test_api_commands import api_as  # noqa: F401  a user and their API caller

pytestmark = [pytest.mark.django_db(transaction=True)]


async def test_a_non_member_is_refused_on_every_command_over_http(api_as, open_clients):  # noqa: F811
    ana, ana_api = await api_as("ana")
    eve, eve_api = await api_as("eve")
    status, ack, _ = await ana_api.post("room.create", {"room": "secret", "private": True}, "c-1")
    assert status == 200 and ack["ok"], ack
    status, ack, _ = await ana_api.post("room.post", {"room": "secret", "body": "hidden"}, "p-1")
    assert status == 200, ack
    for n, (t, d) in enumerate(
        [
            ("room.join", {"room": "secret"}),
            ("room.post", {"room": "secret", "body": "let me in"}),
            ("receipt", {"room": "secret", "read": 1}),
            ("reaction.add", {"room": "secret", "seq": 1}),
            ("room.members", {"room": "secret"}),
            ("typing", {"room": "secret", "typing": True}),
            ("room.invite", {"room": "secret", "user": eve.pk}),
            ("room.leave", {"room": "secret"}),
        ]
    ):
        status, ack, _ = await eve_api.post(t, d, f"e-{n}")
        assert status == 403 and ack["error"]["code"] == "forbidden", (t, status, ack)
    members = await Membership.objects.filter(room__slug="secret").acount()
    assert members == 1


async def test_invitations_are_requests_over_http_and_from_code(api_as):  # noqa: F811
    from messaging import asubmit

    ana, ana_api = await api_as("ana")
    bob, bob_api = await api_as("bob")
    cat = (await api_as("cat"))[0]
    status, ack, _ = await ana_api.post("room.create", {"room": "club", "private": True}, "c-1")
    assert status == 200, ack
    status, ack, _ = await ana_api.post("room.invite", {"room": "club", "user": bob.pk})
    assert status == 200 and ack["d"] == {"room": "club", "user": bob.pk}
    # An invitation, not a membership: bob is nobody in the room until he answers.
    assert not await Membership.objects.filter(room__slug="club", user=bob).aexists()
    status, ack, _ = await bob_api.post("room.members", {"room": "club"})
    assert status == 403
    status, ack, _ = await bob_api.post("rooms.list", {})
    assert ack["d"]["rooms"] == [
        {"room": "club", "private": True, "invited": True, "by": {"id": ana.pk, "name": "ana"}}
    ]
    # He declines; asked again at once, the inviter is refused.
    status, ack, _ = await bob_api.post("room.leave", {"room": "club"})
    assert status == 200 and ack["d"] == {"room": "club"}
    status, ack, _ = await ana_api.post("room.invite", {"room": "club", "user": bob.pk})
    assert status == 403 and ack["error"]["code"] == "forbidden"
    # From code (`messaging.submit`) alike: cat is invited, then accepts with a join.
    assert (await asubmit(ana, "room.invite", {"room": "club", "user": cat.pk}))["ok"]
    assert not await Membership.objects.filter(room__slug="club", user=cat).aexists()
    joined = await asubmit(cat, "room.join", {"room": "club"})
    assert joined["ok"] and {m["user"] for m in joined["d"]["members"]} == {ana.pk, cat.pk}
