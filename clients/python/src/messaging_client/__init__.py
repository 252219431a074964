"""A Python asyncio client of the `messaging` protocol, for bots, scripts, backends and tests.

    from messaging_client import Client, FileStore, sign_in

    session = sign_in("http://127.0.0.1:8000", "bot")
    async with Client("http://127.0.0.1:8000", session=session, store=FileStore("bot-outbox.json")) as client:
        await client.join("lobby")
        await client.post("lobby", "hello")        # once, whatever the network and the servers do
        async for event in client.events():        # every message once, in seq order
            ...

No Django here: it speaks the wire protocol (docs/PROTOCOL.md) over a
WebSocket (the `websockets` package, its only dependency: `pip install
messaging-client`), so it runs in any program and imports nothing of the
server's app. `examples/bot.py` is a complete bot. A client may sign in
with an API token (`Client(url, token=...)`, from `manage.py
messaging_token USERNAME`) instead of a session; `http_command` sends one
command over HTTP with one. No request of the client follows a redirect: a
3xx is a failure (`Redirected`, `SignInFailed`, a failed handshake), and
the token stays where it was sent.
"""

from __future__ import annotations

from .auth import SignInFailed, asign_in, sign_in
from .client import Client, Refused
from .connection import Unauthorized
from .http import ahttp_command, http_command, served_lanes
from .outbox import LANES, FileStore, MemoryStore, Outbox, OutboxFull
from .redirects import Redirected
from .rooms import RoomView

__version__ = "0.3.0"

__all__ = [
    "LANES",
    "Client",
    "FileStore",
    "MemoryStore",
    "Outbox",
    "OutboxFull",
    "Redirected",
    "Refused",
    "RoomView",
    "SignInFailed",
    "Unauthorized",
    "ahttp_command",
    "asign_in",
    "http_command",
    "served_lanes",
    "sign_in",
]
