"""A Python asyncio client of the `messaging` protocol, for bots, scripts, backends and tests.

    from messaging.client import Client, FileStore, sign_in

    session = sign_in("http://127.0.0.1:8000", "bot")
    async with Client("http://127.0.0.1:8000", session=session, store=FileStore("bot-outbox.json")) as client:
        await client.join("lobby")
        await client.post("lobby", "hello")        # once, whatever the network and the servers do
        async for event in client.events():        # every message once, in seq order
            ...

No Django here: it speaks the wire protocol (docs/PROTOCOL.md) over a
WebSocket (the `websockets` package: install `messaging[client]`), so it runs
in any program. `examples/bot.py` is a complete bot.
"""
from __future__ import annotations

from .auth import SignInFailed, asign_in, sign_in
from .client import Client, Refused, Unauthorized
from .outbox import FileStore, MemoryStore, Outbox, OutboxFull
from .rooms import RoomView

__all__ = [
    "Client", "FileStore", "MemoryStore", "Outbox", "OutboxFull", "Refused", "RoomView", "SignInFailed",
    "Unauthorized", "asign_in", "sign_in",
]
