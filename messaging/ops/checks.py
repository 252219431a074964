"""System checks: configurations that break the guarantee or the service quietly.

Each has a stable id (`messaging.E…` errors stop `manage.py check` and
`migrate`; `messaging.W…` warnings do not). Silence one with
`SILENCED_SYSTEM_CHECKS` once you know why it does not apply.

| id | what |
| --- | --- |
| `messaging.E001` | `settings.MESSAGING` has unknown keys or a value it refuses (a malformed `TRUSTED_PROXIES` entry, a limit out of range) |
| `messaging.E002` | the Redis channel layer's socket timeout can fire during its blocking poll |
| `messaging.E003` | `PROMETHEUS_MULTIPROC_DIR` is not a writable directory |
| `messaging.E004`-`E007`, `messaging.W004` | federation's configuration (`MESSAGING_NODE`, the peers, their secrets): messaging/federation/checks.py |
| `messaging.W001` | no `MESSAGING['REDIS_URL']` with `DEBUG` off: live frames stay in their process |
| `messaging.W002` | a cache that swallows Redis errors (`IGNORE_EXCEPTIONS`) |
| `messaging.W003` | `CONN_MAX_AGE = 0` on a server database |
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured

from ..conf import get_settings

TAG = "messaging"
REDIS_LAYER = "channels_redis.core.RedisChannelLayer"
# channels_redis.core.RedisChannelLayer.brpop_timeout, and redis-py's default
# socket timeout, which applies when a host does not set one.
LAYER_POLL_SECONDS = 5
REDIS_DEFAULT_SOCKET_TIMEOUT = 5


@register(TAG)
def check_messaging_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        get_settings()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), hint="See messaging/conf.py for the keys and their defaults.", id="messaging.E001")]
    return []


def _socket_timeout(host: Any) -> float | None:
    """The socket timeout redis-py will use for one `hosts` entry of channels_redis."""
    if not isinstance(host, dict):
        return REDIS_DEFAULT_SOCKET_TIMEOUT
    if "socket_timeout" in host:
        timeout: float | None = host["socket_timeout"]
        return timeout
    query = parse_qs(urlsplit(str(host.get("address", ""))).query)
    if "socket_timeout" in query:
        return float(query["socket_timeout"][0])
    return REDIS_DEFAULT_SOCKET_TIMEOUT


@register(TAG)
def check_fanout(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        redis_url = get_settings().REDIS_URL
    except ImproperlyConfigured:
        return []  # E001 says why
    if redis_url or settings.DEBUG:
        return []
    return [
        Warning(
            "MESSAGING['REDIS_URL'] is not set with DEBUG off.",
            hint="Live frames then reach only sockets of the same process (messaging/transport/fanout.py): with several "
            "server processes a room's messages reach some members live and others only on their next join, "
            "and duplicates are answered from the database alone. Set REDIS_URL.",
            id="messaging.W001",
        )
    ]


@register(TAG)
def check_channel_layers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    found: list[CheckMessage] = []
    for alias, layer in getattr(settings, "CHANNEL_LAYERS", {}).items():
        backend = layer.get("BACKEND")
        if backend == REDIS_LAYER:
            for host in layer.get("CONFIG", {}).get("hosts") or [{}]:
                timeout = _socket_timeout(host)
                if timeout is not None and timeout <= LAYER_POLL_SECONDS + 1:
                    found.append(
                        Error(
                            f"CHANNEL_LAYERS[{alias!r}] has a Redis socket timeout of {timeout} s, which can fire "
                            f"during the layer's {LAYER_POLL_SECONDS} s blocking poll.",
                            hint="Every idle consumer then dies with close code 1011. Give each host as a dict "
                            'with "socket_timeout": None (or more than the poll plus network time).',
                            id="messaging.E002",
                        )
                    )
    return found


@register(TAG)
def check_caches(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    found: list[CheckMessage] = []
    everywhere = getattr(settings, "DJANGO_REDIS_IGNORE_EXCEPTIONS", False)
    for alias, cache in getattr(settings, "CACHES", {}).items():
        if everywhere or cache.get("OPTIONS", {}).get("IGNORE_EXCEPTIONS"):
            found.append(
                Warning(
                    f"CACHES[{alias!r}] swallows Redis errors (IGNORE_EXCEPTIONS).",
                    hint="A failed cache.add() then reads as 'the key exists', and a failed get() as a miss. "
                    "messaging's dedup window uses its own Redis client and falls back to the database, "
                    "but a command handler that takes a lock or dedups on this cache turns a Redis outage "
                    "into silently skipped or repeated work. Let errors raise, or keep this cache out of handlers.",
                    id="messaging.W002",
                )
            )
    return found


@register(TAG)
def check_databases(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    found: list[CheckMessage] = []
    for alias, database in settings.DATABASES.items():
        if database.get("ENGINE", "").endswith("sqlite3"):
            continue  # no connection to set up
        if database.get("CONN_MAX_AGE", 0) == 0:
            found.append(
                Warning(
                    f"DATABASES[{alias!r}] has CONN_MAX_AGE = 0.",
                    hint="Every command then opens and closes a database connection, which costs more than "
                    "the command. Set CONN_MAX_AGE (e.g. 600) with CONN_HEALTH_CHECKS = True, or put a pooler "
                    "in front and say so by silencing this check.",
                    id="messaging.W003",
                )
            )
    return found


@register(TAG)
def check_metrics_directory(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if path and not (os.path.isdir(path) and os.access(path, os.W_OK)):
        return [
            Error(
                f"PROMETHEUS_MULTIPROC_DIR={path} is not a writable directory.",
                hint="Create it (empty) before the server processes start; every metric update fails without it.",
                id="messaging.E003",
            )
        ]
    return []
