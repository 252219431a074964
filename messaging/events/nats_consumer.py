"""A consumer group on NATS JetStream: a durable pull consumer per group.

The same once-per-group application as the Redis stream's (`GroupApplier`):
the inbox record in the handler's transaction, or the seen-set. JetStream
redelivers a message not acknowledged within `ack_wait` (the group's
`claim_after`): a consumer killed before its ack, or a handler that failed,
is retried then, and after `max_attempts` deliveries dead-lettered. A new
group's consumer starts from the first message the stream holds.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import nats
import orjson
from django.db import DatabaseError, connections
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from ..backends import required_url
from .consumers import GroupApplier, Handler
from .nats import STREAM, SUBJECTS, connect
from .retries import exponential

if TYPE_CHECKING:
    from ..conf import MessagingSettings

log = logging.getLogger(__name__)

# What JetStream allows in a durable consumer's name.
DURABLE = re.compile(r"[A-Za-z0-9_-]{1,100}")


class NatsConsumer(GroupApplier):
    def __init__(
        self,
        url: str,
        group: str,
        handler: Handler,
        *,
        name: str | None = None,
        claim_after: float = 30.0,
        max_attempts: int = 5,
        batch: int = 100,
        block: float = 1.0,
    ) -> None:
        super().__init__(group, handler, name=name, claim_after=claim_after, max_attempts=max_attempts)
        if not DURABLE.fullmatch(group):
            raise ValueError("on NATS a group name is letters, digits, - and _")
        self.url = url
        self.batch = batch
        self.block = block

    @classmethod
    def from_settings(
        cls,
        conf: MessagingSettings,
        *,
        url: str | None,
        group: str,
        handler: Handler,
        name: str | None = None,
        claim_after: float = 30.0,
        stream: str | None = None,
        block: float = 1.0,
    ) -> GroupApplier:
        # JetStream's stream is `MESSAGING_EVENTS` (nats.py): `stream` names a Redis stream's key.
        return cls(
            required_url(url),
            group,
            handler,
            name=name,
            claim_after=claim_after,
            max_attempts=conf.EVENTS_MAX_ATTEMPTS,
            batch=min(conf.EVENTS_BATCH, 256),
            block=block,
        )

    def run(self) -> None:
        asyncio.run(self.consume())

    async def consume(self) -> None:
        """Consume until `stop()`; a NATS that is down is waited out."""
        # The handler's database connection belongs to one thread: always the same one.
        database_thread = ThreadPoolExecutor(1, thread_name_prefix="consumer")
        failures = 0
        while not self.stopping:
            client = None
            try:
                client = await connect(self.url)
                subscription = await self.subscribe(client.jetstream())
                while not self.stopping:
                    await self.step(subscription, database_thread)
                    failures = 0
            except (TimeoutError, nats.errors.Error, OSError) as exc:
                failures += 1
                log.warning("consumer %s: nats: %s (retrying)", self.group, exc)
                await asyncio.sleep(exponential(failures))
            except DatabaseError as exc:
                log.warning("consumer %s: database: %s", self.group, exc)
                await asyncio.get_running_loop().run_in_executor(database_thread, self.wait_for_database)
            finally:
                if client is not None:
                    try:
                        await client.close()
                    except Exception:
                        pass
        # The handler's connection goes with its thread (a group stopped in a process that carries on).
        await asyncio.get_running_loop().run_in_executor(database_thread, connections.close_all)
        database_thread.shutdown()

    async def subscribe(self, js: JetStreamContext) -> JetStreamContext.PullSubscription:
        try:
            await js.stream_info(STREAM)
        except NotFoundError:
            await js.add_stream(name=STREAM, subjects=[SUBJECTS])
        config = ConsumerConfig(
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self.claim_after,
            deliver_policy=DeliverPolicy.ALL,
            max_ack_pending=self.batch * 10,
        )
        return await js.pull_subscribe(SUBJECTS, durable=self.group, stream=STREAM, config=config)

    async def step(self, subscription: JetStreamContext.PullSubscription, database_thread: ThreadPoolExecutor) -> int:
        await asyncio.get_running_loop().run_in_executor(database_thread, self.run_periodic)
        try:
            messages = await subscription.fetch(self.batch, timeout=self.block)
        except (TimeoutError, nats.errors.TimeoutError):
            return 0
        loop = asyncio.get_running_loop()
        for message in messages:
            try:
                fields = orjson.loads(message.data)
                if not isinstance(fields, dict):
                    raise ValueError("not an object")
            except ValueError:
                fields = {}  # not one of ours: `handle` dead-letters it
            entry_id = f"nats-{message.metadata.sequence.stream}"
            done = await loop.run_in_executor(
                database_thread,
                functools.partial(self.handle, entry_id, fields, deliveries=message.metadata.num_delivered),
            )
            if done:
                await message.ack()
        return len(messages)
