"""Helpers for tests of the app and of host projects that install it.

    from messaging.testing import Communicator, override_command

    async def test_credit(user):                    # with pytest-django's db and pytest-asyncio
        with override_command("test.echo", lambda ctx, data: data, exactly_once=False):
            client = await Communicator(user).connect()
            ack = await client.call("test.echo", {"x": 1})
            assert ack == {"id": ack["id"], "t": "ack", "ok": True, "dup": False, "d": {"x": 1}}

- `Communicator(user)`: the real consumer in this process, through
  channels' `WebsocketCommunicator`: the protocol's frames (`send`, `call`,
  `ack`, `frames`, ...) without a server or a socket.
- `SocketClient(base_url, session)`: the same methods over a real WebSocket
  to a running server (the `websockets` package and `messaging_client`: the
  `client` extra).
- `override_command(type, apply, **options)` and `override_registry()`:
  command types registered for one test, the registry restored after.
- `ServerProcess(kind, app)`: a real daphne or uvicorn process of your ASGI
  app on a port of its own, for `SocketClient` (`messaging.testing.servers`).

docs/INTEGRATION.md, section 9.
"""

from __future__ import annotations

from .clients import Communicator, FrameClient, SocketClient
from .registry import override_command, override_registry
from .servers import ServerProcess

__all__ = ["Communicator", "FrameClient", "ServerProcess", "SocketClient", "override_command", "override_registry"]
