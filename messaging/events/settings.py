"""The Django adapter of the relay and the consumers: settings in, plain values out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import DEFAULT_DB_ALIAS, connections

from ..conf import get_settings
from .sinks import Sink, sink_for

if TYPE_CHECKING:
    from .relay import Relay


def connection_params(alias: str = DEFAULT_DB_ALIAS) -> dict[str, Any]:
    """psycopg's connection parameters of a Django database, for a connection of our own."""
    params = connections[alias].get_connection_params()
    # Django's cursor classes are sync ones; the async connection brings its own.
    params.pop("cursor_factory", None)
    return params


def events_url() -> str | None:
    conf = get_settings()
    return conf.EVENTS_URL or conf.REDIS_URL


def configured_sink() -> Sink:
    conf = get_settings()
    return sink_for(conf.EVENTS_URL, conf.REDIS_URL, conf.EVENTS_STREAM, conf.EVENTS_STREAM_MAXLEN)


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
