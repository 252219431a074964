"""A socket's send path: every frame it sends, through its bounded send buffer (messaging/transport/servers/)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..core.protocol import encode, frame_not_sent
from ..ops import metrics
from .closes import CLOSE_POLICY
from .servers import TRANSPORT_BUFFER, payload_length

log = logging.getLogger("messaging.transport.consumers")


class Outgoing:
    """The consumer's sending half (a mixin of `ChatConsumer`, which makes `self.outgoing` on connect)."""

    async def send_text(self, text: str) -> None:
        """Send one text frame: every frame this consumer sends goes through here.

        The socket's send buffer (messaging/transport/servers/) writes it to the
        connection, or queues it while the client does not read; it never
        waits, so a room's fan-out is not held up by a slow member. A frame
        too large ever to be sent is replaced by an error frame. A subclass
        that wants to see or change frames overrides this.
        """
        if not self.outgoing.send(text):
            await self.not_sent("live", "frame_too_large", f"{payload_length(text)} bytes", None)

    async def send_frame(self, frame: dict, command_id: str | None = None, *, paced: bool = False) -> int:
        """Encode and send one frame of this socket's own; the bytes of its payload, 0 if it was not sent.

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
        if not self.outgoing.fits(text):
            await self.not_sent(frame.get("t"), "frame_too_large", f"{payload_length(text)} bytes", command_id)
            return 0
        size = payload_length(text)
        if paced and size > TRANSPORT_BUFFER:
            await self.outgoing.room(size)
        await self.send_text(text)
        return size

    async def not_sent(self, what: Any, code: str, detail: str, command_id: str | None) -> None:
        """Log and count a frame that cannot be sent, and send the small error frame that stands for it."""
        metrics.UNSENDABLE_FRAMES.labels("too_large" if code == "frame_too_large" else "unencodable").inc()
        largest = self.outgoing.largest
        log.warning(
            "a %s frame for user %s was not sent (%s): %s, the limit is %d bytes",
            str(what)[:32],
            self.user.pk,
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

    def send_buffer_overflowed(self, frames: int, waited: int) -> None:
        """More than `MAX_SEND_BUFFER` waits for this socket's client: close it with 1008.

        The send buffer has dropped what waited; the frames still queued in
        the inbox are dropped too, and the close goes in a task of its own,
        since the send that overflowed may be a room's fan-out.
        """
        metrics.SEND_BUFFER_OVERFLOWS.inc()
        log.warning(
            "closing a socket of user %s with 1008: %d bytes waited for its client (MAX_SEND_BUFFER %d), "
            "%d frames dropped",
            self.user.pk,
            waited,
            self.outgoing.limit,
            frames,
        )
        self.stop_answering()
        self.overflow_close = asyncio.ensure_future(self.close(code=CLOSE_POLICY))

    async def send(
        self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool | int = False
    ) -> None:
        """Channels' `send`, for a host's code: a text frame goes through `send_text`, behind the frames before it."""
        if text_data is not None and getattr(self, "outgoing", None) is not None:
            await self.send_text(text_data)
            if close:
                await self.close(close)
            return
        await super().send(text_data=text_data, bytes_data=bytes_data, close=close)
