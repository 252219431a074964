"""Integration fixtures: the real consumer on real PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import channel_layers

from messaging.core.claims import reset_claim_store
from messaging.testing import Communicator as Client  # the tests' name for it
from messaging.testing import override_command

from ..support.servers import RedisServer


@pytest.fixture(autouse=True)
def _require_real_services(settings):
    assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql", (
        "integration tests need PostgreSQL"
    )
    assert settings.REDIS_URL, "integration tests need Redis (REDIS_URL)"


@pytest.fixture(autouse=True)
def redis_client():
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    client.flushdb()
    reset_claim_store()
    yield client
    client.flushdb()
    reset_claim_store()
    client.close()


@pytest.fixture(autouse=True)
def _fresh_channel_layer():
    """Each test has its own event loop; the layer's connections belong to one."""
    yield
    channel_layers.backends.clear()


@pytest.fixture
def own_redis(tmp_path):
    server = RedisServer(tmp_path).start()
    yield server
    server.stop()


@pytest.fixture
def make_user(django_user_model):
    counter = iter(range(1_000_000))

    def make(name: str | None = None):
        n = next(counter)
        return django_user_model.objects.create_user(
            username=f"user{n}-{uuid.uuid4().hex[:6]}", first_name=name or f"user{n}"
        )

    return database_sync_to_async(make)


@pytest.fixture
async def open_clients():
    clients: list[Client] = []

    async def open_client(user) -> Client:
        client = await Client(user).connect()
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        try:
            await client.close()
        except Exception:
            pass


def message_rows(**filters):
    from messaging.models import Message

    return list(
        Message.objects.filter(**filters)
        .order_by("room_id", "seq")
        .values("room__slug", "seq", "sender_id", "client_msg_id", "body")
    )


rows = database_sync_to_async(message_rows)


async def gather(*aws):
    return await asyncio.gather(*aws)


def apply_command(user, t: str, d: dict, id: str | None = None):
    """Run one command through the real registry and pipeline, without a socket (from sync code).

    Returns the `Outcome`; refusals raise their `CommandError`.
    """
    from messaging.core import pipeline
    from messaging.core.protocol import Command

    return async_to_sync(pipeline.submit)(user, Command(id=id or uuid.uuid4().hex, t=t, d=d))


def database_conninfo() -> str:
    """The test database as a libpq connection string, for code that opens a connection of its own (the bench's)."""
    from django.db import connection
    from psycopg.conninfo import make_conninfo

    params = connection.get_connection_params()
    keys = ("dbname", "user", "password", "host", "port")
    return make_conninfo(**{key: params[key] for key in keys if params.get(key)})


def post_delivery(user, room: str, body: str, id: str | None = None):
    """One delivery of a `room.post`, validated, as a batch carries it."""
    from messaging.core import pipeline
    from messaging.core.protocol import Command

    return pipeline.prepare(user, Command(id=id or uuid.uuid4().hex, t="room.post", d={"room": room, "body": body}))


@pytest.fixture
def on_this_thread(settings):
    """The pipeline's database work on the calling thread's connection (asgiref's
    thread-sensitive hop, no loop connections), where a sync test counts its queries."""
    settings.MESSAGING = {**settings.MESSAGING, "LOOP_DATABASE": False, "DB_THREADS": 0}


def run_batch(deliveries):
    """One batch of the pipeline (claims, apply, records, results), from sync code."""
    from messaging.core import pipeline

    return async_to_sync(pipeline.run_batch)(deliveries)


def wait_until(predicate, timeout: float = 30, what: str = "a condition") -> None:
    """Poll `predicate` until it holds; only a precondition's deadline, never a timing assertion."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def broken_type():
    """A registered exactly-once command type whose handler always raises; yields its type."""

    def apply(ctx, data):
        raise RuntimeError("the handler broke")

    with override_command("test.broken", apply) as type:
        yield type


def move_by_function(user, room_slug: str, delivered, read):
    """A receipt's move in its PostgreSQL form (one call of the database's function), on this
    thread's connection and transaction: the statement `move_watermarks_by_function` sends
    through the gateway, for tests that compare it with the ORM's form inside one transaction."""
    [move] = moves_by_function([(user, room_slug, delivered, read)])
    if isinstance(move, Exception):
        raise move
    return move


def moves_by_function(receipts: list[tuple]):
    """Several receipts `(user, room, delivered, read)` in one call of the database's function
    (a batch), on this thread's connection and transaction: per receipt its move or refusal."""
    from messaging.chat.receipts import MOVE_CALL, Asked, called_moves, move_parameters
    from messaging.core.gateway import fetch_on_this_thread

    asked = [Asked(*receipt) for receipt in receipts]
    return called_moves(fetch_on_this_thread(MOVE_CALL, move_parameters(asked)), asked)
