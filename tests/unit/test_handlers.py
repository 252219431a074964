"""The command registry's contract: what a handler may declare."""

from __future__ import annotations

import pytest

from messaging.core import handlers


async def batch_form(gateway, entries):
    return [{} for _ in entries]


def test_a_type_takes_a_batch_form_per_database_vendor_and_none_elsewhere():
    handlers.command("test.batched", batch={"postgresql": batch_form})(lambda ctx, data: {})
    try:
        handler = handlers.lookup("test.batched")
        assert handler.batch_form("postgresql") is batch_form
        assert handler.batch_form("sqlite") is None
    finally:
        del handlers._registry["test.batched"]


def test_a_type_registered_twice_differently_is_refused():
    handlers.command("test.twice")(lambda ctx, data: {})
    try:
        with pytest.raises(ValueError, match="already registered"):
            handlers.command("test.twice", exactly_once=False)(lambda ctx, data: {})
    finally:
        del handlers._registry["test.twice"]


def test_what_a_type_means_to_clients_is_a_trait_of_its_handler():
    # Acks whose `members` the transport marks `online`; the outbox's room lanes.
    assert {t for t in handlers.registered() if handlers.lookup(t).member_list} >= {"room.join", "room.members"}
    assert not handlers.lookup("room.post").member_list
    assert handlers.lanes() == {"room.post": "room", "message.edit": "room", "message.delete": "room"}


def test_a_hosts_type_with_a_room_lane_is_published_with_the_built_in_ones():
    handlers.command("test.vote", lane="room")(lambda ctx, data: {})
    try:
        assert handlers.lanes()["test.vote"] == "room"
        from messaging.transport.http.openapi import document

        assert document()["x-messaging-lanes"] == handlers.lanes()
    finally:
        del handlers._registry["test.vote"]
    assert "test.vote" not in handlers.lanes()
