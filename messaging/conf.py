"""The only module that reads Django settings for the app.

All options live in one dict, `settings.MESSAGING`; each has a typed default:

| key | default | meaning |
| --- | --- | --- |
| `DEDUP_WINDOW` | 3600 | seconds a command's result stays in Redis |
| `CLAIM_LEASE` | 10 | seconds a claim blocks its id if its owner dies |
| `IN_PROGRESS_WAIT` | 2.0 | seconds a duplicate waits for the first attempt before `in_progress` |
| `MAX_FRAME_BYTES` | 65536 | largest text frame; larger ones close the socket with 1009 |
| `REPLAY_LIMIT` | 500 | most messages sent as backlog on `room.join` with `since` |
| `RECENT_ON_JOIN` | 50 | messages sent as backlog on `room.join` without `since` |
| `BODY_MAX_CHARS` | 4000 | longest message body, after trimming |
| `BAD_FRAME_LIMIT` | 10 | malformed frames in a row that close the socket with 1008 |
| `REDIS_URL` | None | Redis for the dedup window; None keeps only the durable record |
| `REDIS_TIMEOUT` | 0.5 | seconds before a Redis call counts as failed and the database path takes over |
| `DB_THREADS` | 0 | threads that run commands, each with its own database connection; 0: channels' one thread |
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed


@dataclass(frozen=True)
class MessagingSettings:
    DEDUP_WINDOW: int = 3600
    CLAIM_LEASE: float = 10.0
    IN_PROGRESS_WAIT: float = 2.0
    MAX_FRAME_BYTES: int = 65536
    REPLAY_LIMIT: int = 500
    RECENT_ON_JOIN: int = 50
    BODY_MAX_CHARS: int = 4000
    BAD_FRAME_LIMIT: int = 10
    REDIS_URL: str | None = None
    REDIS_TIMEOUT: float = 0.5
    DB_THREADS: int = 0


@lru_cache(maxsize=1)
def get_settings() -> MessagingSettings:
    given = dict(getattr(django_settings, "MESSAGING", {}) or {})
    known = {f.name for f in fields(MessagingSettings)}
    unknown = set(given) - known
    if unknown:
        raise ImproperlyConfigured(f"MESSAGING has unknown keys: {', '.join(sorted(unknown))}")
    return MessagingSettings(**given)


def _reset(*, setting: str, **kwargs: object) -> None:
    if setting == "MESSAGING":
        get_settings.cache_clear()


setting_changed.connect(_reset)
