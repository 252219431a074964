"""What escapes a read handed over by daphne_reads.py: logged and kept from asyncio, as `callWithLogger` does."""

from __future__ import annotations

import pytest
from twisted.logger import globalLogPublisher

from messaging.transport.daphne_reads import read_from


class Reading:
    """A reactor whose read of a connection raises `error`."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def _readOrWrite(self, connection: object, reading: bool) -> None:
        raise self.error


class Named:
    def logPrefix(self) -> str:
        return "WebSocketProtocol,7,127.0.0.1"


@pytest.fixture
def logged():
    events: list[dict] = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)


@pytest.mark.parametrize("error", [RuntimeError("a bug in a protocol"), SystemExit(3)])
def test_an_error_escaping_a_read_is_logged_with_the_connections_name(error, logged):
    read_from(Reading(error), Named())
    (event,) = [e for e in logged if e.get("log_namespace") == "twisted.internet.asyncioreactor"]
    assert event["connection"] == "WebSocketProtocol,7,127.0.0.1"
    assert event["log_failure"].value is error


def test_an_interrupt_escaping_a_read_is_not_caught(logged):
    with pytest.raises(KeyboardInterrupt):
        read_from(Reading(KeyboardInterrupt()), Named())
    assert not logged
