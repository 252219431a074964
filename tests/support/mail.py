"""A real local SMTP server for the mention e-mails' tests (aiosmtpd), and what it received."""

from __future__ import annotations

import email
from collections.abc import Callable

from aiosmtpd.controller import Controller

from .servers import free_port


class Mailbox:
    """Every message the server accepted, parsed; `on_message` (if set) runs on each as it arrives."""

    def __init__(self) -> None:
        self.messages: list[email.message.Message] = []
        self.on_message: Callable[[email.message.Message], None] | None = None

    async def handle_DATA(self, server, session, envelope):
        message = email.message_from_bytes(envelope.content)
        self.messages.append(message)
        if self.on_message is not None:
            self.on_message(message)
        return "250 OK"


class SmtpServer:
    """aiosmtpd on a port of its own, stopped and started again (a controller runs once: a new one each time)."""

    def __init__(self) -> None:
        self.mailbox = Mailbox()
        self.port = free_port()
        self.controller: Controller | None = None

    def start(self) -> None:
        self.controller = Controller(self.mailbox, hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None
