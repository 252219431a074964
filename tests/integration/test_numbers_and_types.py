"""PROTOCOL 1.1, "Safety limits", on the real consumer: data the server cannot handle is refused
with an ack `invalid` for its command alone, changes nothing, and never counts as a bad frame."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async

from messaging.conf import get_settings
from messaging.models import CommandRecord, Membership

from .conftest import rows

pytestmark = [pytest.mark.django_db(transaction=True)]


def nested(levels: int) -> dict:
    """An object `levels` deep, counting itself as the first."""
    value: object = "bottom"
    for n in range(levels - 1):
        value = [value] if n % 2 else {"k": value}
    return {"k": value}


def watermarks(user) -> tuple[int, int]:
    membership = Membership.objects.get(user=user, room__slug="lobby")
    return membership.delivered, membership.read


async def refused(client, t: str, d: dict) -> str:
    ack = await client.call(t, d)
    assert not ack["ok"], ack
    return ack["error"]["code"]


@pytest.mark.parametrize("number", [2**63, -(2**63) - 1, 2**64, 10**30])
async def test_a_receipt_beyond_int64_is_invalid_and_moves_nothing(make_user, open_clients, number):
    client = await open_clients(await make_user())
    await client.join("lobby")
    assert (await client.call("room.post", {"room": "lobby", "body": "one"}))["ok"]
    # 2^63 was `unavailable`: PostgreSQL has no bigint for it.
    assert await refused(client, "receipt", {"room": "lobby", "read": number}) == "invalid"
    assert await refused(client, "receipt", {"room": "lobby", "delivered": number}) == "invalid"
    assert await database_sync_to_async(watermarks)(client.user) == (0, 0)
    assert (await client.call("receipt", {"room": "lobby", "read": 1}))["ok"]


async def test_int64_bounds_are_numbers_like_any_other(make_user, open_clients):
    client = await open_clients(await make_user())
    await client.join("lobby")
    # Within int64: the receipt's own check answers (beyond the room's last seq).
    assert await refused(client, "receipt", {"room": "lobby", "read": 2**63 - 1}) == "invalid"
    ack = await client.call("room.post", {"room": "lobby", "body": "hi", "junk": [2**63 - 1, -(2**63)]})
    assert ack["ok"]


@pytest.mark.parametrize("number", [2**63, -(2**63) - 1, 2**64, 1e300])
async def test_a_post_with_a_number_beyond_int64_anywhere_is_invalid(make_user, open_clients, number):
    client = await open_clients(await make_user())
    await client.join("lobby")
    ack = await client.call("room.post", {"room": "lobby", "body": "hi", "junk": {"n": [number]}})
    assert ack["error"]["code"] == "invalid" and "outside -2^63..2^63-1" in ack["error"]["message"]
    assert await rows() == []


async def test_data_nested_32_levels_is_fine_33_is_invalid(make_user, open_clients):
    client = await open_clients(await make_user())
    await client.join("lobby")
    # `d` is the first level: its `junk` holds 31 more.
    assert (await client.call("room.post", {"room": "lobby", "body": "deep", "junk": nested(31)}))["ok"]
    ack = await client.call("room.post", {"room": "lobby", "body": "deeper", "junk": nested(32)})
    assert ack["error"] == {"code": "invalid", "message": "d is nested deeper than 32 levels", "retry": False}
    assert [row["body"] for row in await rows()] == ["deep"]


async def test_a_post_nested_300_levels_is_invalid_not_unavailable(make_user, open_clients):
    # orjson reads 1,024 levels and writes 254: the fingerprint could not be made.
    client = await open_clients(await make_user())
    await client.join("lobby")
    assert await refused(client, "room.post", {"room": "lobby", "body": "x", "junk": nested(300)}) == "invalid"
    assert await refused(client, "room.join", {"room": "lobby", "junk": nested(300)}) == "invalid"
    assert await rows() == [] and await database_sync_to_async(CommandRecord.objects.count)() == 0


async def test_refusals_of_commands_with_an_id_do_not_close_the_socket(make_user, open_clients):
    client = await open_clients(await make_user())
    await client.join("lobby")
    bad = {"room": "lobby", "body": "x", "junk": nested(300)}
    for n in range(get_settings().BAD_FRAME_LIMIT + 2):
        await client.send_raw(json.dumps({"id": f"bad-{n}", "t": "room.post", "d": bad}))
    for n in range(get_settings().BAD_FRAME_LIMIT + 2):
        assert (await client.ack(f"bad-{n}"))["error"]["code"] == "invalid"
    assert (await client.call("room.post", {"room": "lobby", "body": "still open"}))["ok"]


# JSON text, since the standard library cannot write it: orjson reads 1,024 levels.
DEEP_LIST = "[" * 990 + "]" * 990


@pytest.mark.parametrize(
    "t",
    ['["room.post"]', '{"t": "room.post"}', "7", "1.5", "null", "false", DEEP_LIST],
    ids=["list", "object", "integer", "float", "null", "false", "list-990-deep"],
)
async def test_a_type_that_is_not_a_string_is_invalid(make_user, open_clients, t):
    # A `t` nested 990 levels was str()-ed into the log scope: RecursionError, 1011.
    client = await open_clients(await make_user())
    await client.join("lobby")
    await client.send_raw('{"id": "typed", "t": %s, "d": {"room": "lobby", "body": "x"}}' % t)
    ack = await client.ack("typed")
    assert ack["error"] == {"code": "invalid", "message": "t must be a string", "retry": False}
    assert await rows() == []
    assert (await client.call("room.post", {"room": "lobby", "body": "still open"}))["ok"]


async def test_a_string_type_without_a_handler_is_unknown_type(make_user, open_clients):
    client = await open_clients(await make_user())
    ack = await client.call("room.nope\n", {})
    assert ack["error"]["code"] == "unknown_type" and ack["error"]["message"] == "no handler for 'room.nope\\n'"


async def test_refusals_of_types_do_not_count_as_bad_frames(make_user, open_clients):
    client = await open_clients(await make_user())
    limit = get_settings().BAD_FRAME_LIMIT
    for n in range(limit + 2):
        t = DEEP_LIST if n % 2 else f'"nope.{n}"'
        await client.send_raw('{"id": "t-%d", "t": %s, "d": {}}' % (n, t))
    codes = [(await client.ack(f"t-{n}"))["error"]["code"] for n in range(limit + 2)]
    assert codes == ["unknown_type", "invalid"] * (limit // 2 + 1)
    assert (await client.join("lobby"))["ok"]


@pytest.mark.parametrize(
    "d",
    [
        {"room": "lobby", "body": "a truncated emoji \ud83d"},  # what JSON.stringify writes: "\ud83d"
        {"room": "lobby", "body": "\udfff"},
        {"room": "lobby", "body": "fine", "junk": {"note": ["x\ud800"]}},
        {"room": "lobby", "body": "fine", "\udc00": 1},
    ],
    ids=["body-truncated-emoji", "body-low-surrogate", "elsewhere-in-d", "in-a-key"],
)
async def test_a_lone_surrogate_in_d_gets_an_ack_invalid_not_bad_frame(make_user, open_clients, d):
    # It was `bad_frame` without an ack: the page's outbox resent it forever.
    client = await open_clients(await make_user())
    await client.join("lobby")
    text = json.dumps({"id": "half-emoji", "t": "room.post", "d": d})
    assert "\\ud" in text or "\\udfff" in text  # escaped in the JSON text, as browsers send it
    await client.send_raw(text)
    ack = await client.ack("half-emoji")
    assert ack["error"]["code"] == "invalid" and "lone surrogate" in ack["error"]["message"]
    assert ack["error"]["retry"] is False
    assert await rows() == []
    assert (await client.call("room.post", {"room": "lobby", "body": "a whole emoji \U0001f600"}))["ok"]
    assert [row["body"] for row in await rows()] == ["a whole emoji \U0001f600"]


async def test_lone_surrogates_are_refused_on_every_command_and_never_count_as_bad_frames(make_user, open_clients):
    client = await open_clients(await make_user())
    limit = get_settings().BAD_FRAME_LIMIT
    for n in range(limit + 2):
        t = ["room.join", "receipt", "room.post", "reaction.add"][n % 4]
        await client.send(t, {"room": "lobby", "body": "\ud800", "read": 1, "seq": 1}, id=f"s-{n}")
    codes = {(await client.ack(f"s-{n}"))["error"]["code"] for n in range(limit + 2)}
    assert codes == {"invalid"}
    ack = await client.call("room.nope\ud800", {})
    assert ack["error"] == {"code": "unknown_type", "message": "no handler for 'room.nope\\ud800'", "retry": False}
    assert (await client.join("lobby"))["ok"]
