"""The claim store's contract (messaging/core/claims.py `ClaimStore`), run by every store the app ships:
`RedisClaimStore` on Redis, `ClusterClaimStore` on a Redis Cluster.

Per key, in the order given: True, claimed for the caller; False, someone
else's claim; the `Stored` result once `finish` kept one, for every caller;
None, unknown (the store's service failed: never an exception). A claim is
released only by its owner.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from messaging.backends import CLAIM_STORES, backend, claim_store_path
from messaging.conf import get_settings
from messaging.core.claims import ClaimStore, Stored, claim_key, get_claim_store, reset_claim_store

from .conftest import using


@pytest.fixture(params=["redis", "cluster"])
def kind(request):
    return request.param


@pytest.fixture
def store(kind, request, settings):
    """The store the settings choose, by its dotted path."""
    if kind == "redis":
        using(settings, REDIS_URL=request.getfixturevalue("redis_url"), REDIS_CLUSTER=False)
    else:
        cluster = request.getfixturevalue("redis_cluster")
        using(settings, REDIS_URL=cluster.url, REDIS_CLUSTER=True)
    assert claim_store_path(get_settings()) == CLAIM_STORES[kind]
    reset_claim_store()
    yield get_claim_store()
    reset_claim_store()
    if kind == "cluster":
        from redis.cluster import RedisCluster as ClusterClient

        client = ClusterClient.from_url(settings.MESSAGING["REDIS_URL"])
        client.flushall(target_nodes=ClusterClient.PRIMARIES)
        client.close()


def keys(*commands: str, user: int = 1) -> list[str]:
    return [claim_key(user, c) for c in commands]


async def test_a_free_key_is_claimed_once_and_is_someone_elses_for_the_others(store):
    [key] = keys("c1")
    assert await store.claim_many([key], "a") == [True]
    assert await store.claim_many([key], "b") == [False]
    assert await store.claim_many([key], "a") == [False], "a claim is held, not taken again by its owner"


async def test_answers_come_in_the_order_of_the_keys_and_a_key_twice_is_claimed_once(store):
    held, free = keys("held", "free")
    await store.claim_many([held], "other")
    assert await store.claim_many([free, held, free], "a") == [True, False, False]


async def test_a_kept_result_answers_every_caller_and_replaces_the_claim(store):
    [key] = keys("c1")
    await store.claim_many([key], "a")
    result = Stored("fp", {"seq": 7, "body": "héllo"})
    await store.finish([(key, result)], [], "a")
    assert await store.claim_many([key], "b") == [result]
    assert await store.claim_many([key], "a") == [result]


async def test_only_the_owner_releases_its_claim(store):
    [key] = keys("c1")
    await store.claim_many([key], "a")
    await store.finish([], [key], "b")
    assert await store.claim_many([key], "c") == [False], "another owner's release changes nothing"
    await store.finish([], [key], "a")
    assert await store.claim_many([key], "c") == [True]


async def test_a_result_is_kept_whoever_holds_the_claim_now(store):
    # A slow first attempt whose claim ran out: its committed result is the truth for the newer one too.
    [key] = keys("c1")
    await store.claim_many([key], "newer")
    result = Stored("fp", {"seq": 1})
    await store.finish([(key, result)], [], "older")
    assert await store.claim_many([key], "third") == [result]


async def test_a_batch_of_many_users_is_answered_per_key(store):
    batch = [claim_key(user, f"c{user}") for user in range(40)]
    await store.claim_many(batch[::2], "other")
    assert await store.claim_many(batch, "a") == [n % 2 == 1 for n in range(40)]
    results = [(key, Stored(f"fp{n}", {"n": n})) for n, key in enumerate(batch) if n % 2]
    await store.finish(results, [], "a")
    answers = await store.claim_many(batch, "b")
    assert [a.data["n"] if isinstance(a, Stored) else a for a in answers] == [n if n % 2 else False for n in range(40)]


async def test_a_store_whose_service_is_down_answers_unknown_and_raises_nothing(kind, settings, nowhere, request):
    using(settings, REDIS_URL=f"redis://127.0.0.1:{nowhere}/0", REDIS_CLUSTER=kind == "cluster")
    reset_claim_store()
    try:
        store = get_claim_store()
        assert await store.claim_many(keys("c1", "c2"), "a") == [None, None]
        await store.finish([(claim_key(1, "c1"), Stored("fp", {}))], keys("c2"), "a")
    finally:
        reset_claim_store()


async def test_the_base_store_knows_nothing(settings):
    using(settings, REDIS_URL=None, REDIS_CLUSTER=False)
    reset_claim_store()
    try:
        store = get_claim_store()
        assert type(store) is ClaimStore
        assert await store.claim_many(keys("c1", "c2"), "a") == [None, None]
    finally:
        reset_claim_store()


class HostStore(ClaimStore):
    """A host's own store, named by its dotted path."""

    @classmethod
    def from_settings(cls, conf):
        store = cls()
        store.lease = conf.CLAIM_LEASE
        return store


def test_a_host_names_its_own_store_by_its_dotted_path(settings):
    using(settings, CLAIM_STORE=f"{__name__}.HostStore", CLAIM_LEASE=3.0)
    reset_claim_store()
    try:
        store = get_claim_store()
        assert isinstance(store, HostStore) and store.lease == 3.0
    finally:
        reset_claim_store()


def test_a_path_that_is_no_store_stops_the_app_with_its_setting_named():
    with pytest.raises(ImproperlyConfigured, match="CLAIM_STORE.*cannot be imported"):
        backend("CLAIM_STORE", "messaging.core.claims.NoSuchStore")
    with pytest.raises(ImproperlyConfigured, match="CLAIM_STORE.*has no from_settings, claim_many, finish"):
        backend("CLAIM_STORE", "messaging.core.claims.Stored")
