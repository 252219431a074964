"""A session's send path: every frame it sends, through its port's bounded buffer (messaging/transport/ports.py)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..core.protocol import encode, frame_not_sent
from ..ops import metrics
from .ports import Buffer
from .servers import TRANSPORT_BUFFER, payload_length

log = logging.getLogger("messaging.transport.consumers")


class Sender:
    """The frames of the session of `user_pk`, on their way to its `buffer`."""

    __slots__ = ("buffer", "user_pk", "send_text")

    def __init__(self, buffer: Buffer, user_pk: Any) -> None:
        self.buffer = buffer
        self.user_pk = user_pk
        # Every text frame of the session goes through this: `emit`, or a
        # transport's hook that sees or changes frames and then emits them
        # (`ChatConsumer.send_text`).
        self.send_text: Callable[[str], Awaitable[None]] = self.emit

    async def emit(self, text: str) -> None:
        """Hand one text frame to the buffer, which never waits, so a room's fan-out
        is not held up by a slow member; a frame too large ever to be sent is
        replaced by an error frame."""
        if not self.buffer.send(text):
            await self.not_sent("live", "frame_too_large", f"{payload_length(text)} bytes", None)

    async def send_frame(self, frame: Mapping[str, Any], command_id: str | None = None, *, paced: bool = False) -> int:
        """Encode and send one frame of this session's own; the bytes of its payload, 0 if it was not sent.

        `command_id` is the command whose ack or reply it is: a frame that
        cannot be encoded or is too large to send is replaced by an error
        frame naming it, so its client learns why the ack or reply is missing.
        `paced`: a large frame (a `room.history` page may be as large as the
        limit) waits until it fits beside what waits for the client, as a
        command's replies do, instead of overflowing the buffer.
        """
        try:
            text = encode(frame)
        except TypeError as exc:  # orjson.JSONEncodeError is one
            await self.not_sent(frame.get("t"), "frame_unencodable", str(exc), command_id)
            return 0
        if not self.buffer.fits(text):
            await self.not_sent(frame.get("t"), "frame_too_large", f"{payload_length(text)} bytes", command_id)
            return 0
        size = payload_length(text)
        if paced and size > TRANSPORT_BUFFER:
            await self.buffer.room(size)
        await self.send_text(text)
        return size

    async def not_sent(self, what: Any, code: str, detail: str, command_id: str | None) -> None:
        """Log and count a frame that cannot be sent, and send the small error frame that stands for it."""
        metrics.UNSENDABLE_FRAMES.labels("too_large" if code == "frame_too_large" else "unencodable").inc()
        largest = self.buffer.largest
        log.warning(
            "a %s frame for user %s was not sent (%s): %s, the limit is %d bytes",
            str(what)[:32],
            self.user_pk,
            code,
            detail,
            largest,
        )
        message = (
            f"a frame of {detail} is over the {largest} bytes this server sends in one"
            if code == "frame_too_large"
            else "a frame could not be encoded as JSON"
        )
        await self.send_text(encode(frame_not_sent(code, message, command_id)))
