"""The Django adapter of the relay and the consumers: settings in, plain values out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import DEFAULT_DB_ALIAS, connections

from .. import backends
from ..conf import get_settings
from .sinks import Sink

if TYPE_CHECKING:
    from .relay import Relay


def connection_params(alias: str = DEFAULT_DB_ALIAS) -> dict[str, Any]:
    """psycopg's connection parameters of a Django database, for a connection of our own."""
    params = connections[alias].get_connection_params()
    # Django's cursor classes are sync ones; the async connection brings its own.
    params.pop("cursor_factory", None)
    return params


def events_url() -> str | None:
    """Where the events go and are read: `EVENTS_URL`, else the Redis stream on `REDIS_URL`."""
    return backends.events_url(get_settings())


def configured_sink() -> Sink:
    """A sink of the class `EVENTS_SINK` names, else the one `EVENTS_URL`'s scheme picks (messaging/backends.py)."""
    conf = get_settings()
    sink: Sink = backends.backend("EVENTS_SINK", backends.sink_path(conf)).from_settings(conf)
    return sink


def configured_relay() -> Relay:
    from .relay import Relay

    conf = get_settings()
    return Relay(
        connection_params(),
        configured_sink(),
        partitions=conf.EVENTS_PARTITIONS,
        batch=conf.EVENTS_BATCH,
        poll_interval=conf.EVENTS_POLL_INTERVAL,
        retention=conf.EVENTS_RETENTION,
    )
