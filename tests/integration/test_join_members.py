"""The join ack's members carry `joined_seq`, so clients can tell a message's recipients."""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.django_db(transaction=True)]


async def test_join_ack_members_carry_the_seq_they_joined_at(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    await ana.join("lobby")
    for n in range(2):
        await ana.call("room.post", {"room": "lobby", "body": f"m{n}"})
    bob = await open_clients(await make_user("bob"))
    ack = await bob.join("lobby")
    assert [(m["name"], m["joined_seq"]) for m in ack["d"]["members"]] == [("ana", 0), ("bob", 2)]
    # Joining again does not move it: bob is a recipient of seq 3 onwards only.
    again = await bob.join("lobby", since=2)
    assert [m["joined_seq"] for m in again["d"]["members"]] == [0, 2]
