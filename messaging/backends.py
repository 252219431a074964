"""Which implementation of each backend the app uses: one dotted path per kind, where a host may name its own.

| setting | kind | unset: chosen from |
| --- | --- | --- |
| `CLAIM_STORE` | the fast window of exactly-once (`messaging.core.claims.ClaimStore`) | `REDIS_URL`, `REDIS_CLUSTER` |
| `HUB` | live fan-out to sockets (`messaging.transport.hub.Hub`) | `REDIS_URL` (`REDIS_CLUSTER`: sharded) |
| `EVENTS_SINK` | where the relay publishes (`messaging.events.sinks.Sink`) | the scheme of `EVENTS_URL`, else `REDIS_URL` |
| `EVENTS_GROUP` | a consumer of a group (`messaging.events.consumers.GroupApplier`) | the same URL's scheme |

Each path names a class; the app builds it with its classmethod
`from_settings(conf)` (a group's: `from_settings(conf, url=..., group=...,
handler=..., name=..., claim_after=..., stream=..., block=...)`), so a
class reads what settings it needs. What each kind must do is its contract
(docs/INTEGRATION.md, "Bringing your own backend"), which tests/contracts
runs against every implementation the app ships.

This module imports no implementation: each is imported by its path when it
is first built, so the modules that define a kind's base never import their
subclasses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

if TYPE_CHECKING:
    from .conf import MessagingSettings

CLAIM_STORES = {
    "none": "messaging.core.claims.ClaimStore",
    "redis": "messaging.core.claims.RedisClaimStore",
    "cluster": "messaging.core.cluster_claims.ClusterClaimStore",
}
HUBS = {"process": "messaging.transport.hub.Hub", "redis": "messaging.transport.redis_hub.RedisHub"}
SINKS = {"redis": "messaging.events.redis_streams.RedisStreamSink", "nats": "messaging.events.nats.NatsSink"}
GROUPS = {"redis": "messaging.events.consumers.Consumer", "nats": "messaging.events.nats_consumer.NatsConsumer"}

# What a class of each kind must have: checked as it is loaded, so a wrong path fails at once.
REQUIRED = {
    "CLAIM_STORE": ("from_settings", "claim_many", "finish"),
    "HUB": (
        "from_settings",
        "join",
        "leave",
        "release",
        "attach",
        "detach",
        "publish",
        "publish_to_user",
        "aclose",
    ),
    "EVENTS_SINK": ("from_settings", "publish", "aclose"),
    "EVENTS_GROUP": ("from_settings", "run", "stop"),
}

NATS_SCHEMES = ("nats://", "tls://")
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def claim_store_path(conf: MessagingSettings) -> str:
    """`CLAIM_STORE`, else: the cluster's store with `REDIS_CLUSTER`, Redis's with `REDIS_URL`, else none."""
    if conf.CLAIM_STORE:
        return conf.CLAIM_STORE
    if not conf.REDIS_URL:
        return CLAIM_STORES["none"]
    return CLAIM_STORES["cluster" if conf.REDIS_CLUSTER else "redis"]


def hub_path(conf: MessagingSettings) -> str:
    """`HUB`, else: the Redis hub with `REDIS_URL`, the in-process hub without."""
    if conf.HUB:
        return conf.HUB
    return HUBS["redis" if conf.REDIS_URL else "process"]


def events_url(conf: MessagingSettings) -> str | None:
    """Where the events go and are read: `EVENTS_URL`, else the Redis stream on `REDIS_URL`."""
    return conf.EVENTS_URL or conf.REDIS_URL


NO_EVENTS_URL = "events need a stream: set MESSAGING['EVENTS_URL'] or MESSAGING['REDIS_URL']"


def required_events_url(conf: MessagingSettings) -> str:
    """`events_url`; ImproperlyConfigured if there is none."""
    return required_url(events_url(conf))


def required_url(url: str | None) -> str:
    """The events' `url`, as given; ImproperlyConfigured if there is none."""
    if not url:
        raise ImproperlyConfigured(NO_EVENTS_URL)
    return url


def _by_scheme(setting: str, url: str | None, choices: dict[str, str]) -> str:
    if url and url.startswith(NATS_SCHEMES):
        return choices["nats"]
    if url and url.startswith(REDIS_SCHEMES):
        return choices["redis"]
    if not url:
        raise ValueError(NO_EVENTS_URL)
    raise ValueError(
        f"EVENTS_URL must be redis://... or nats://... (or set MESSAGING['{setting}']), not {url.split(':', 1)[0]}:..."
    )


def sink_path(conf: MessagingSettings, url: str | None = None) -> str:
    """`EVENTS_SINK`, else by the scheme of `url` (default: `events_url`): NATS JetStream or a Redis stream."""
    return conf.EVENTS_SINK or _by_scheme("EVENTS_SINK", url or events_url(conf), SINKS)


def group_path(conf: MessagingSettings, url: str | None = None) -> str:
    """`EVENTS_GROUP`, else by the scheme of `url` (default: `events_url`), like the sink."""
    return conf.EVENTS_GROUP or _by_scheme("EVENTS_GROUP", url or events_url(conf), GROUPS)


def backend(setting: str, path: str) -> Any:
    """The class `path` names, as the value of `setting`; ImproperlyConfigured if it is none or lacks its contract."""
    try:
        cls = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"MESSAGING['{setting}'] {path!r} cannot be imported: {exc}") from exc
    missing = [name for name in REQUIRED[setting] if not callable(getattr(cls, name, None))]
    if missing:
        raise ImproperlyConfigured(f"MESSAGING['{setting}'] {path!r} has no {', '.join(missing)}")
    return cls
