"""The fast window of exactly-once: claims and results in Redis.

A claim is taken atomically (`SET NX` with a lease of `CLAIM_LEASE`); the
result then replaces the claim for `DEDUP_WINDOW`. Duplicates that Redis
knows are answered by it, never by the database (the statement of posts
may look up their records beside the claims: messaging/core/pipeline.py,
and it changes nothing for them). Only the claim's owner may release it
(compare-and-delete), so a slow first attempt can never free a newer claim.

Redis failing is never taken for "already claimed": every Redis error
answers "unknown", and the command goes to the database path, which alone
still guarantees exactly-once (messaging/core/records.py).
"""

from __future__ import annotations

import logging
import time
import weakref
from dataclasses import dataclass
from typing import Any

import orjson
import redis.asyncio as aioredis
from django.core.exceptions import ImproperlyConfigured

from ..backends import backend, claim_store_path
from ..conf import MessagingSettings, get_settings
from .redis_clients import REDIS_FAILED
from .runtime import runtime

log = logging.getLogger(__name__)

CLAIM_PREFIX = b"c:"
RESULT_PREFIX = b"r:"

# A batch's claims in one call, so redis-py packs and parses one command, not
# one per key. KEYS: the commands' keys; ARGV: the claim, the lease in ms.
# Per key, its current value if it has one, else false once the claim is set
# (a key twice in one batch: the second copy finds the first one's claim).
_CLAIM_MANY = """
local found = {}
for i, key in ipairs(KEYS) do
    local v = redis.call('GET', key)
    if v then
        found[i] = v
    else
        redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
        found[i] = false
    end
end
return found
"""
# A batch's results and releases in one call. KEYS: the results' keys, then
# the claims to release; ARGV: how many results, the window in seconds, the
# owner's claim, then the results. A claim is released only if it is still
# this owner's.
_FINISH = """
local results = tonumber(ARGV[1])
for i = 1, results do
    redis.call('SET', KEYS[i], ARGV[3 + i], 'EX', ARGV[2])
end
for i = results + 1, #KEYS do
    if redis.call('GET', KEYS[i]) == ARGV[3] then redis.call('DEL', KEYS[i]) end
end
return results
"""


@dataclass(frozen=True)
class Stored:
    """A command's result as the window or the record keeps it, with the fingerprint of its command."""

    fingerprint: str
    data: dict[str, Any]


def claim_key(user_id: Any, command_id: str) -> str:
    # The user in braces is the key's hash tag: in a Redis Cluster all of one
    # user's claims live in one slot, so a batch of one sender's commands is
    # one script call (messaging/core/cluster_claims.py).
    return f"messaging:cmd:{{{user_id}}}:{command_id}"


class ClaimStore:
    """The fast window. The base class knows nothing: every command goes to the database.

    The contract (tests/contracts/test_claim_stores.py): `claim_many` answers
    per key, in order; a key claimed is False (or its `Stored` result once
    `finish` kept one) for every other owner until released or its lease
    ends; `finish` keeps results and releases only the owner's own claims;
    any failure of the store's service is None ("unknown"), never an error.
    """

    @classmethod
    def from_settings(cls, conf: MessagingSettings) -> ClaimStore:
        """The store the settings describe (`CLAIM_STORE` names the class)."""
        return cls()

    async def claim_many(self, keys: list[str], owner: str) -> list[Stored | bool | None]:
        """Per key: True, claimed for `owner`; a `Stored`, the result; False, someone else's claim; None, unknown."""
        return [None] * len(keys)

    async def finish(self, results: list[tuple[str, Stored]], releases: list[str], owner: str) -> None:
        """Keep each `(key, result)` for the window; release each claim of `releases` that `owner` still holds."""


class RedisClaimStore(ClaimStore):
    """Claims and results in Redis, with short timeouts and a breaker.

    After a Redis error the store answers "unknown" for `cooldown` seconds
    without trying, so an outage costs one timeout, not one per command.
    """

    def __init__(self, url: str, *, lease: float, window: int, timeout: float = 0.5, cooldown: float = 1.0) -> None:
        self.url = url
        self.timeout = timeout
        self.lease_ms = int(lease * 1000)
        self.window = int(window)
        self.cooldown = cooldown
        self._down_until = 0.0
        # The scripts on each event loop's client (the loop's runtime holds it).
        # redis-py's scripts load themselves again into a Redis that forgot
        # them (restarted, flushed) and resend the call.
        self._scripts: weakref.WeakKeyDictionary[aioredis.Redis, tuple[Any, ...]] = weakref.WeakKeyDictionary()

    @classmethod
    def from_settings(cls, conf: MessagingSettings) -> ClaimStore:
        if not conf.REDIS_URL:
            raise ImproperlyConfigured(f"MESSAGING['CLAIM_STORE'] {cls.__name__} needs MESSAGING['REDIS_URL']")
        return cls(conf.REDIS_URL, lease=conf.CLAIM_LEASE, window=conf.DEDUP_WINDOW, timeout=conf.REDIS_TIMEOUT)

    @property
    def client(self) -> aioredis.Redis:
        """This event loop's client of the store's Redis."""
        return runtime().redis_client(self.url, self.timeout)

    def _loop_scripts(self) -> tuple[Any, ...]:
        client = self.client
        scripts = self._scripts.get(client)
        if scripts is None:
            scripts = self._scripts[client] = (client.register_script(_CLAIM_MANY), client.register_script(_FINISH))
        return scripts

    def _available(self) -> bool:
        return time.monotonic() >= self._down_until

    def _failed(self, action: str, exc: BaseException) -> None:
        self._down_until = time.monotonic() + self.cooldown
        log.warning("redis %s failed, using the database path: %s", action, exc)

    async def claim_many(self, keys: list[str], owner: str) -> list[Stored | bool | None]:
        if not keys or not self._available():
            return [None] * len(keys)
        try:
            claim_many, _ = self._loop_scripts()
            replies = await claim_many(keys=keys, args=[CLAIM_PREFIX + owner.encode(), self.lease_ms])
        except REDIS_FAILED as exc:
            self._failed("claim", exc)
            return [None] * len(keys)
        return self._claims(replies)

    @staticmethod
    def _claims(replies: list[bytes | None]) -> list[Stored | bool | None]:
        results: list[Stored | bool | None] = []
        for current in replies:
            if current is None:
                results.append(True)
            elif current.startswith(RESULT_PREFIX):
                fingerprint, data = orjson.loads(current[len(RESULT_PREFIX) :])
                results.append(Stored(fingerprint, data))
            else:
                results.append(False)
        return results

    async def finish(self, results: list[tuple[str, Stored]], releases: list[str], owner: str) -> None:
        call = self._finish_call(results, releases, owner)
        if call is None:
            return
        try:
            _, finish = self._loop_scripts()
            await finish(**call)
        except REDIS_FAILED as exc:
            # An unreleased claim frees its id when the lease runs out.
            self._failed("store", exc)

    def _finish_call(self, results: list[tuple[str, Stored]], releases: list[str], owner: str) -> dict[str, Any] | None:
        """The finish script's keys and arguments; None if there is nothing to do."""
        if not self._available():
            # Keep no results while Redis is down; still try the releases.
            results = []
        if not results and not releases:
            return None
        keys: list[str] = []
        values: list[bytes] = []
        releases = list(releases)
        for key, stored in results:
            try:
                values.append(RESULT_PREFIX + orjson.dumps([stored.fingerprint, stored.data]))
            except orjson.JSONEncodeError as exc:
                # A handler's result orjson cannot write (the database's JSON
                # encoder took it): this command alone is not kept here, and
                # its claim is released, so a retry finds the durable record.
                log.warning("result of %s not kept in redis: %s", key, exc)
                releases.append(key)
                continue
            keys.append(key)
        if not keys and not releases:
            return None
        # Each result is written whatever claim is there now: it is committed,
        # so it is the truth for every attempt, the owner's or a newer one's.
        return {"keys": keys + releases, "args": [len(keys), self.window, CLAIM_PREFIX + owner.encode(), *values]}


_store: ClaimStore | None = None


def get_claim_store() -> ClaimStore:
    """The process's claim store: the class `CLAIM_STORE` names (messaging/backends.py), built once."""
    global _store
    if _store is None:
        conf = get_settings()
        _store = backend("CLAIM_STORE", claim_store_path(conf)).from_settings(conf)
    return _store


def reset_claim_store() -> None:
    """Forget the store, so the next command builds one from current settings."""
    global _store
    _store = None
