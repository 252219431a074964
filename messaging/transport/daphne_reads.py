"""Daphne's reads handed to the connection without Twisted's legacy log context.

Twisted's asyncio reactor (the one daphne runs) registers each reader with
asyncio as `callWithLogger(reader, reactor._readOrWrite, reader, True)`, so
every read of every socket first asks the connection for its `logPrefix()`,
copies the thread's log context into a new dict with it, pushes that, reads,
and pops it. The context is read by one thing only: Twisted's legacy
`log.msg` / `log.err`, which prefix a line with the connection's name
(its `system`). Daphne logs with the standard library's `logging`, and a
failure inside a read is caught, logged and turned into a disconnect by
`_readOrWrite` itself, which is still what runs. With 10,000 idle sockets
pinged every 20 s, one read per pong, the context was about a tenth of
what a ping cost the process (py-spy: `callWithLogger` around `doRead`).

`read_plainly()` registers a TCP connection's reads as `_readOrWrite`
called by a small function that keeps `callWithLogger`'s one other duty:
anything that escapes `_readOrWrite` (a `connectionLost` that raises, say)
is logged with the connection's name and does not reach asyncio. What
changes: a legacy Twisted log line written during a read carries no
`system` of its connection. Listening ports, pipes and every other reader
keep Twisted's own registration, and so does every Twisted this was not
checked on (`CHECKED_TWISTED`). The consumer applies it as its first socket
opens (`adapt_to_daphne`); a connection registered before keeps the way it
was registered.
"""

from __future__ import annotations

import sys
from typing import Any

from .versions import checked

CHECKED_TWISTED = ("24.", "25.", "26.")


def read_plainly() -> None:
    """Make the asyncio reactor hand a TCP connection's reads to it without the legacy log context; once."""
    reactor_module = sys.modules.get("twisted.internet.asyncioreactor")
    if reactor_module is None or not checked("twisted", CHECKED_TWISTED):
        return  # not the asyncio reactor, or a Twisted whose reader registration this was not checked against
    Reactor = reactor_module.AsyncioSelectorReactor
    registered = Reactor.addReader
    if getattr(registered, "plainly", False):
        return
    Connection = sys.modules["twisted.internet.tcp"].Connection

    def addReader(self: Any, reader: Any) -> None:
        if not isinstance(reader, Connection) or reader in self._readers or reader in self._continuousPolling._readers:
            registered(self, reader)
            return
        fd = reader.fileno()
        try:
            self._asyncioEventloop.add_reader(fd, read_from, self, reader)
        except OSError:
            # What Twisted does about a descriptor epoll refuses (polling it,
            # or raising) is Twisted's: let it register the reader its way.
            self._unregisterFDInAsyncio(fd)
            registered(self, reader)
            return
        self._readers[reader] = fd

    addReader.plainly = True  # type: ignore[attr-defined]
    Reactor.addReader = addReader


def read_from(reactor: Any, connection: Any) -> None:
    """One read of `connection`, as Twisted's reactor does it, less the legacy log context."""
    try:
        reactor._readOrWrite(connection, True)
    except KeyboardInterrupt:
        raise
    except BaseException:
        # `callWithLogger`'s catch, which `_readOrWrite` leaves to it: all but
        # an interrupt, a `SystemExit` included. Twisted is imported here, not
        # with this module, which uvicorn's processes load too.
        from twisted.logger import Logger

        Logger(namespace="twisted.internet.asyncioreactor").failure(
            "reading {connection} failed", connection=logged_as(connection)
        )


def logged_as(connection: Any) -> str:
    try:
        return str(connection.logPrefix())
    except KeyboardInterrupt:
        raise
    except BaseException:
        return "(buggy logPrefix method)"
