"""Model checking: random interleavings of sends, duplicates, drops,
reconnects, handler failures and cache flushes keep the invariants.

A hypothesis state machine drives one user's sockets on the real consumer
(real PostgreSQL and Redis). Its model is what an outbox knows: the commands
it sent, the acks it got. After every step the database must agree with it:

* every acked id is stored exactly once, under the seq its acks carry;
* all acks for one id carry the same `d`, at most one with `dup: false`;
* seqs are gapless and nothing is stored that was never sent.

At the end the outbox retries everything still unacked, and every command
must end up acked: nothing is lost.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis
from channels.layers import channel_layers
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

from messaging.core import handlers
from messaging.core.claims import reset_claim_store
from messaging.core.protocol import format_time
from messaging.models import CommandRecord, Membership, Message, Room

from .conftest import Client

pytestmark = [pytest.mark.django_db(transaction=True)]

TYPE = "test.model-post"
SOCKETS = 3


class Faults:
    """The handler's failure switch: armed, the next apply fails after its effect."""

    armed = 0


def flaky_post(ctx, data):
    result = handlers.lookup("room.post").apply(ctx, data)
    if Faults.armed:
        Faults.armed -= 1
        raise RuntimeError("injected handler failure")  # the transaction takes the effect back
    return result


class ExactlyOnce(RuleBasedStateMachine):
    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        Faults.armed = 0
        Message.objects.all().delete()
        CommandRecord.objects.all().delete()
        Membership.objects.all().delete()
        Room.objects.all().delete()
        self.redis = redis.Redis.from_url(django_settings.REDIS_URL)
        self.redis.flushdb()
        reset_claim_store()
        channel_layers.backends.clear()
        self.loop = asyncio.new_event_loop()
        self.user = get_user_model().objects.create_user(username=f"model-{uuid.uuid4().hex[:12]}")
        self.sockets: list[Client] = []
        self.sent: dict[str, str] = {}  # id -> body
        self.acks: dict[str, list[dict]] = {}  # id -> ok acks
        self.retryable: dict[str, int] = {}  # id -> retry: true refusals

    def run(self, coro):
        return self.loop.run_until_complete(asyncio.wait_for(coro, 30))

    async def open_socket(self) -> Client:
        client = await Client(self.user).connect()
        await client.join("model")
        return client

    def frame(self, id: str) -> dict:
        return {"room": "model", "body": self.sent[id]}

    def record(self, ack: dict) -> None:
        if ack["ok"]:
            self.acks.setdefault(ack["id"], []).append(ack)
        else:
            assert ack["error"]["retry"] is True, ack  # nothing here is a refusal for good
            self.retryable[ack["id"]] = self.retryable.get(ack["id"], 0) + 1

    @initialize()
    def open_sockets(self):
        self.sockets = [self.run(self.open_socket()) for _ in range(SOCKETS)]

    # -- the client's actions -----------------------------------------------------

    @rule(target=ids, socket=st.integers(0, SOCKETS - 1))
    def send(self, socket):
        id = uuid.uuid4().hex
        self.sent[id] = f"message {len(self.sent)}"
        self.record(self.run(self.sockets[socket].call(TYPE, self.frame(id), id=id)))
        return id

    @rule(id=ids, socket=st.integers(0, SOCKETS - 1))
    def duplicate(self, id, socket):
        self.record(self.run(self.sockets[socket].call(TYPE, self.frame(id), id=id)))

    @rule(id=ids)
    def duplicate_on_every_socket_at_once(self, id):
        async def all_at_once():
            await asyncio.gather(*(s.send(TYPE, self.frame(id), id=id) for s in self.sockets))
            return await asyncio.gather(*(s.ack(id) for s in self.sockets))

        for ack in self.run(all_at_once()):
            self.record(ack)

    @rule(target=ids, socket=st.integers(0, SOCKETS - 1))
    def send_then_drop(self, socket):
        """The socket drops right after sending: the ack is lost, the outbox keeps the id."""
        id = uuid.uuid4().hex
        self.sent[id] = f"message {len(self.sent)}"

        async def send_and_drop():
            await self.sockets[socket].send(TYPE, self.frame(id), id=id)
            await self.sockets[socket].close()
            self.sockets[socket] = await self.open_socket()

        self.run(send_and_drop())
        return id

    @rule(socket=st.integers(0, SOCKETS - 1))
    def reconnect(self, socket):
        async def again():
            await self.sockets[socket].close()
            self.sockets[socket] = await self.open_socket()

        self.run(again())

    # -- the faults ---------------------------------------------------------------

    @precondition(lambda self: Faults.armed == 0)
    @rule()
    def fail_the_next_handler_run(self):
        Faults.armed = 1

    @rule()
    def flush_the_cache(self):
        self.redis.flushdb()  # this test's Redis db only; the durable record must answer

    # -- the invariants -------------------------------------------------------------

    @invariant()
    def database_agrees_with_every_ack(self):
        stored = {
            id: (room, seq, at)
            for room, seq, id, at in Message.objects.values_list("room__slug", "seq", "client_msg_id", "sent_at")
        }
        assert Message.objects.count() == len(stored), "an id stored twice"
        assert set(stored) <= set(self.sent), "stored but never sent"
        for id, acks in self.acks.items():
            room, seq, at = stored[id]
            assert all(a["d"] == {"room": room, "seq": seq, "at": format_time(at)} for a in acks), acks
            assert sum(not a["dup"] for a in acks) <= 1, f"{id} applied twice"
        assert sorted(seq for _, seq, _ in stored.values()) == list(range(1, len(stored) + 1)), "a gap in seqs"
        assert CommandRecord.objects.count() == len(stored)

    def teardown(self):
        try:
            # The outbox's last word: retry every unacked command until it is acked.
            for _ in range(5):
                Faults.armed = 0
                for id in [id for id in self.sent if id not in self.acks]:
                    self.record(self.run(self.sockets[0].call(TYPE, self.frame(id), id=id)))
            assert set(self.acks) == set(self.sent), "a command was lost"
            self.database_agrees_with_every_ack()
        finally:
            for client in self.sockets:
                self.run(client.close())
            self.loop.close()
            channel_layers.backends.clear()
            self.redis.close()


@pytest.fixture
def model_type(settings):
    settings.MESSAGING = {**settings.MESSAGING, "USER_RATE_LIMIT": 10**6, "RATE_BURST": 10**6}
    post = handlers.lookup("room.post")
    handlers.register(handlers.Handler(type=TYPE, apply=flaky_post, validate=post.validate))
    yield
    handlers._registry.pop(TYPE)


def test_exactly_once_holds_over_random_interleavings(model_type):
    ExactlyOnce.TestCase.settings = settings(
        max_examples=25,
        stateful_step_count=20,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    ExactlyOnce.TestCase().runTest()
