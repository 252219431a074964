"""The WebSocket consumer: Channels' adapter of a session (messaging/transport/session.py).

A connected client is a `Session`, which imports no framework; this module
is the port it talks through under Channels (messaging/transport/ports.py):
the socket's send buffer (messaging/transport/servers/) and its close, and
the frames Channels hands it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.utils.functional import LazyObject, empty

from ..conf import get_settings
from ..core.redis_clients import REDIS_FAILED
from .addresses import client_of_scope
from .daphne_compat import adapt_to_daphne
from .fanout import get_hub
from .servers import SendBuffer, send_buffer
from .session import Session
from .signins import credential_of, credential_watch

log = logging.getLogger(__name__)

Receive = Callable[[], Awaitable[dict[str, Any]]]


def resilient(receive: Receive) -> Receive:
    """Retry the channel layer's receive, so an outage of its Redis pauses
    live fan-out instead of killing every socket with 1011. Commands keep
    working meanwhile (the database path), and clients catch up by seq."""

    async def receive_until_it_works() -> dict[str, Any]:
        pause = 0.1
        while True:
            try:
                return await receive()
            except REDIS_FAILED as exc:
                log.warning("channel layer receive failed, retrying in %.1fs: %s", pause, exc)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 2.0)

    return receive_until_it_works


def resolved(user: Any) -> Any:
    """The user behind channels' lazy `scope["user"]`, once AuthMiddleware resolved it.

    Every attribute read through the proxy is a Python call; the session
    reads the user on every frame.
    """
    if isinstance(user, LazyObject) and user._wrapped is not empty:
        return user._wrapped
    return user


class ChatConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels has no types
    # Rooms' live frames come through the app's own hub (messaging/transport/fanout.py),
    # so a socket does not listen on the channel layer: no channel, no
    # receive task and no Redis poll per socket. A host's subclass that wants
    # channel-layer events for its sockets names its layer here.
    channel_layer_alias: str | None = None
    session: Session | None = None

    # Channels assigns `channel_receive` in `__call__` and hands it to its
    # dispatch loop right away; wrapping it on assignment is the one hook.
    @property
    def channel_receive(self) -> Receive:
        return self._channel_receive

    @channel_receive.setter
    def channel_receive(self, receive: Receive) -> None:
        self._channel_receive = resilient(receive)

    async def __call__(
        self, scope: dict[str, Any], receive: Receive, send: Callable[[dict[str, Any]], Awaitable[None]]
    ) -> None:
        """Dispatch the socket's messages as they come.

        Channels' loop (`await_many_dispatch`) waits on a task per source,
        and makes a new task and an `asyncio.wait` for every frame, to listen
        on the channel layer too: 9 us of the loop's CPU per frame here. A
        socket that listens only to its client awaits `receive` directly; a
        subclass that names a channel layer gets channels' loop.
        """
        if get_channel_layer(self.channel_layer_alias) is not None:
            await super().__call__(scope, receive, send)
            return
        self.scope = scope
        self.channel_layer = None
        self.base_send = send
        try:
            while True:
                await self.dispatch(await receive())
        except StopConsumer:
            pass

    async def dispatch(self, message: dict[str, Any]) -> None:
        # channels' dispatch runs close_old_connections on its one sync thread
        # before every handler: a thread hop per frame and per fan-out event,
        # a quarter of the server's CPU under load. The session reaches the
        # database only through the gateway (`Gateway.run`), which does that upkeep
        # around each call itself.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"no handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        self.user = user = resolved(self.scope.get("user"))
        conf = get_settings()
        adapt_to_daphne()
        await self.accept()
        # Everything this socket sends waits here until the connection takes it.
        self.buffer: SendBuffer = send_buffer(
            self.base_send, conf.MAX_SEND_BUFFER, self.overflowed, adapters=conf.SERVER_ADAPTERS
        )
        signed_in = user is not None and user.is_authenticated
        watch = credential_watch() if signed_in else None
        self.session = session = Session(
            self,
            user,
            get_hub(),
            client_address=client_of_scope(self.scope) if signed_in else None,
            credential=credential_of(self.scope, user) if watch is not None else None,
            watch=watch,
        )
        if type(self).send_text is not ChatConsumer.send_text:
            session.sender.send_text = self.send_text
        await session.start()

    def overflowed(self, frames: int, waited: int) -> None:
        if self.session is not None:
            self.session.overflowed(frames, waited)

    async def disconnect(self, code: int) -> None:
        if self.session is not None:
            await self.session.end()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.session is not None:
            await self.session.receive(text_data)

    async def end(self, code: int | None, reason: str | None = None) -> None:
        """The port's close: Channels' own, now."""
        await super().close(code=code, reason=reason)

    async def close(self, code: int | bool | None = None, reason: str | None = None) -> None:
        """Close the socket after the frames sent before it; frames queued behind it are not answered."""
        if self.session is None:  # closed before `connect` made the session
            await super().close(code=code, reason=reason)
        else:
            await self.session.close(code, reason)

    async def send_text(self, text: str) -> None:
        """Every frame this socket sends passes here: the method a subclass overrides to see or change them.

        It goes to the socket's send buffer, which never waits, so a room's
        fan-out is not held up by a slow member.
        """
        assert self.session is not None
        await self.session.sender.emit(text)

    async def send(
        self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool | int = False
    ) -> None:
        """Channels' `send`, for a host's code: a text frame goes through `send_text`, behind the frames before it."""
        if text_data is not None and self.session is not None:
            await self.send_text(text_data)
            if close:
                await self.close(close)
            return
        await super().send(text_data=text_data, bytes_data=bytes_data, close=close)
