"""A private room is closed to non-members over `POST /api/commands` too: every command is 403 `forbidden`."""
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
    for n, (t, d) in enumerate([
        ("room.join", {"room": "secret"}),
        ("room.post", {"room": "secret", "body": "let me in"}),
        ("receipt", {"room": "secret", "read": 1}),
        ("reaction.add", {"room": "secret", "seq": 1}),
        ("room.members", {"room": "secret"}),
        ("typing", {"room": "secret", "typing": True}),
        ("room.invite", {"room": "secret", "user": eve.pk}),
        ("room.leave", {"room": "secret"}),
    ]):
        status, ack, _ = await eve_api.post(t, d, f"e-{n}")
        assert status == 403 and ack["error"]["code"] == "forbidden", (t, status, ack)
    members = await Membership.objects.filter(room__slug="secret").acount()
    assert members == 1
