"""Rooms created per client address (`ROOMS_CREATED_PER_ADDRESS_PER_HOUR`) on two real daphne processes:
fresh guests, each under its own per-user limit, cannot together create more than the address may."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from messaging.models import Membership, Room
from messaging.testing import SocketClient
from messaging.transport.tokens import create_token
from messaging_client import asign_in

pytestmark = [pytest.mark.e2e]

PER_ADDRESS = 6
ENV = {"TRUSTED_PROXIES": "127.0.0.1", "MESSAGING_ROOMS_CREATED_PER_ADDRESS_PER_HOUR": str(PER_ADDRESS)}


async def guest(server, name: str, address: str) -> SocketClient:
    """A new guest's socket, as a proxy at 127.0.0.1 would forward it from `address`."""
    session = await asign_in(server.url, name)
    return await SocketClient(server.url, session, headers={"X-Forwarded-For": f"10.9.9.9, {address}"}).connect()


def rooms_from(address: str) -> list[str]:
    return list(Room.objects.filter(created_from=address).values_list("slug", flat=True))


async def test_fresh_guests_from_one_address_create_at_most_its_rooms_over_two_processes(start_daphne):
    a, b = start_daphne(**ENV), start_daphne(**ENV)
    guests = await asyncio.gather(*(guest(server, f"g{n}", "203.0.113.7") for n, server in enumerate([a, b] * 4)))
    try:
        # Every way a room is made, at once, from 8 guests on two processes:
        # a join of a new slug and a create each (16 rooms asked for).
        async def make_two(n: int, client: SocketClient) -> list[dict]:
            return [
                await client.call("room.join", {"room": f"new-{n}"}),
                await client.call("room.create", {"room": f"made-{n}", "private": n % 2 == 0}),
            ]

        acks = [ack for both in await asyncio.gather(*(make_two(n, c) for n, c in enumerate(guests))) for ack in both]
        refused = [ack for ack in acks if not ack["ok"]]
        assert len(acks) - len(refused) == PER_ADDRESS
        assert {ack["error"]["code"] for ack in refused} == {"rate_limited"}
        assert all(ack["error"]["retry"] and ack["error"]["retry_after"] > 0 for ack in refused)
        # Nothing was made for a refused command: no room, no membership.
        assert await sync_to_async(Room.objects.count)() == PER_ADDRESS
        assert len(await sync_to_async(rooms_from)("203.0.113.7")) == PER_ADDRESS
        assert await sync_to_async(Membership.objects.count)() == PER_ADDRESS
        # A direct conversation is a room too.
        partner = await sync_to_async(get_user_model().objects.create_user)(username="partner")
        opened = await guests[0].call("dm.open", {"user": partner.pk})
        assert opened["error"]["code"] == "rate_limited"
        # Rooms that exist are still joined from the address (4 of the 16 were private: some are public).
        public = await sync_to_async(lambda: list(Room.objects.filter(private=False).values_list("slug", flat=True)))()
        assert all([(await guests[1].call("room.join", {"room": slug}))["ok"] for slug in public])
        # Another address behind the same proxy creates its own.
        elsewhere = await guest(b, "h", "203.0.113.8")
        guests.append(elsewhere)
        assert (await elsewhere.call("room.join", {"room": "elsewhere"}))["ok"]
        assert (await elsewhere.call("dm.open", {"user": partner.pk}))["ok"]
        assert len(await sync_to_async(rooms_from)("203.0.113.8")) == 2
    finally:
        await asyncio.gather(*(client.close() for client in guests))


def token_of_new_user(name: str) -> str:
    user = get_user_model().objects.create_user(username=name, first_name=name)
    return create_token(user, "e2e")[1]


async def test_rooms_created_over_http_count_for_the_address_too(start_daphne):
    a, b = start_daphne(**ENV), start_daphne(**ENV)
    tokens = [await sync_to_async(token_of_new_user)(f"bot{n}") for n in range(PER_ADDRESS + 2)]

    def create(server, token: str, room: str, address: str) -> tuple[int, dict, dict]:
        headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
            "Idempotency-Key": f"create-{room}",
            "X-Forwarded-For": address,
        }
        status, response_headers, body = server.request(
            "POST", "/api/commands", json.dumps({"t": "room.create", "d": {"room": room}}), headers
        )
        return status, json.loads(body), response_headers

    answers = [
        await asyncio.to_thread(create, server, token, f"api-{n}", "203.0.113.9")
        for n, (server, token) in enumerate(zip([a, b] * 4, tokens))
    ]
    assert [status for status, _, _ in answers] == [200] * PER_ADDRESS + [429] * 2
    assert all(int(headers["retry-after"]) > 0 for status, _, headers in answers if status == 429)
    assert await sync_to_async(Room.objects.count)() == PER_ADDRESS
    status, _, _ = await asyncio.to_thread(create, b, tokens[-1], "api-other", "203.0.113.10")
    assert status == 200
