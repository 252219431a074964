"""A session's answers: the pipeline's results for its commands, written back as acks, replies and broadcasts, in order."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ..conf import get_settings
from ..core import handlers, pipeline
from ..core.exceptions import CommandError, Unavailable
from ..core.outcomes import Delivery, Outcome
from ..core.protocol import Command, ack_error, ack_ok
from ..ops import metrics
from ..ops.logcontext import command_scope
from .presence import add_online
from .typing import posted as typing_posted

if TYPE_CHECKING:
    from .session import Session

log = logging.getLogger("messaging.transport.consumers")


class Answers:
    """How `session` answers the commands the pipeline ran for it."""

    __slots__ = ("session", "sender", "rooms", "user")

    def __init__(self, session: Session) -> None:
        self.session = session
        self.sender = session.sender
        self.rooms = session.rooms
        self.user = session.user

    async def join(self, delivery: Delivery) -> None:
        """A command that subscribes the session to a room (`room.join`), alone:
        subscribed before it runs, its room's live frames held until its ack and backlog are sent."""
        command, handler, rooms = delivery.command, delivery.handler, self.rooms
        assert handler.subscribes_to is not None
        with command_scope(command.id, command.t, self.user.pk):
            room = handler.subscribes_to(delivery.data)
            rooms.held[room] = []
            subscribed = await rooms.subscribe(room)
            [result] = await self.results([delivery])
            if not isinstance(result, Outcome):
                await rooms.unsubscribe(subscribed)
                await self.refuse(command, handler, result, delivery.received)
                await rooms.release_held(room)
                return
            await self.ack(command, handler, result, delivery.received)
            last_seq = result.data.get("last_seq")
            if isinstance(last_seq, int):
                rooms.live_after[room] = last_seq
            if result.data.get("private") is True and room in rooms.rooms:
                # Who hears a private room is checked against the database from now on.
                rooms.hub.watch(room, rooms)
            await rooms.release_held(room)
            rooms.publish(result)

    async def results(self, deliveries: list[Delivery]) -> list[Outcome | CommandError]:
        """The pipeline's answers to `deliveries`; an unexpected failure, logged, is `unavailable`."""
        try:
            results = await pipeline.run(deliveries)
        except Exception:
            log.exception("a batch of %d commands by user %s failed", len(deliveries), self.user.pk)
            return [Unavailable()] * len(deliveries)
        return [
            result if isinstance(result, (Outcome, CommandError)) else self.session.unavailable(d.command, result)
            for d, result in zip(deliveries, results)
        ]

    async def run_together(self, deliveries: list[Delivery]) -> None:
        """Deliveries that take effect in their order (or one alone), answered in it."""
        results = await self.results(deliveries)
        for delivery, result in zip(deliveries, results):
            command, handler = delivery.command, delivery.handler
            with command_scope(command.id, command.t, self.user.pk):
                if isinstance(result, Outcome):
                    await self.ack(command, handler, result, delivery.received)
                    self.rooms.publish(result)
                    if handler.type == "room.post" and not result.dup:
                        typing_posted(result.data["room"], self.user)
                else:
                    await self.refuse(command, handler, result, delivery.received)

    async def ack(self, command: Command, handler: handlers.Handler, outcome: Outcome, started: float) -> None:
        """The command's ack, then its replies (a join's backlog), which cost the session's rate by their size."""
        if handler.member_list:
            await add_online(outcome.data.get("members"))
        await self.sender.send_frame(ack_ok(command.id, outcome.data, dup=outcome.dup), command.id, paced=True)
        self.answered(handler, "dup" if outcome.dup else "ok", started, source=outcome.source)
        sent = 0
        for frame in outcome.replies:
            # As fast as the client reads them: a backlog may be larger than MAX_SEND_BUFFER.
            await self.sender.buffer.room()
            if self.session.closed:  # closing (or overflowed): the rest would be dropped
                break
            sent += await self.sender.send_frame(frame, command.id)
        if sent:
            self.session.bucket.charge(sent / get_settings().REPLY_BYTES_PER_TOKEN)

    async def refuse(
        self, command: Command, handler: handlers.Handler | None, error: CommandError, started: float
    ) -> None:
        await self.sender.send_frame(ack_error(command.id, error.as_error()), command.id)
        self.answered(handler, error.code, started)

    def answered(
        self, handler: handlers.Handler | None, outcome: str, started: float, *, source: str | None = None
    ) -> None:
        """Count and log one ack, the one place where every command's outcome is known."""
        seconds = time.perf_counter() - started
        metrics.command_answered(handler.type if handler else metrics.UNKNOWN_TYPE, outcome, seconds, source=source)
        # Refusals at INFO; successes at DEBUG, since a line per command costs
        # more than a cheap command itself under load.
        log.log(
            logging.DEBUG if outcome in ("ok", "dup") else logging.INFO,
            "answered %s%s in %.1f ms",
            outcome,
            f" from {source}" if source else "",
            seconds * 1000,
        )
