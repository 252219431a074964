"""`POST /api/commands` (PROTOCOL.md 1.1 "Commands over HTTP") on real PostgreSQL and Redis.

Requests go through Django's ASGI handler on the test's event loop, the loop
of the sockets beside them (channels' communicator), as one server process
runs both.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from messaging.core.claims import claim_key, reset_claim_store
from messaging.models import ApiToken, CommandRecord
from messaging.transport.tokens import create_token

from .conftest import rows

pytestmark = [pytest.mark.django_db(transaction=True)]

new_token = database_sync_to_async(lambda user: create_token(user, "test")[1])


class Api:
    """One caller of the HTTP API, with a token (or none, or the given headers)."""

    def __init__(self, token: str | None = None, client: AsyncClient | None = None) -> None:
        self.client = client or AsyncClient()
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def post(self, t, d, key: str | None = None, *, body: str | bytes | None = None, **headers):
        headers = {**self.headers, **headers}
        if key is not None:
            headers["Idempotency-Key"] = key
        data = body if body is not None else json.dumps({"t": t, "d": d})
        response = await self.client.post("/api/commands", data=data, content_type="application/json", headers=headers)
        return response.status_code, json.loads(response.content), response


@pytest.fixture
def api_as(make_user):
    async def make(name: str | None = None):
        user = await make_user(name)
        return user, Api(await new_token(user))

    return make


async def test_post_over_http_reaches_a_socket_once(api_as, open_clients):
    user, api = await api_as("ana")
    socket = await open_clients(user)
    await socket.join("lobby")
    status, ack, response = await api.post("room.post", {"room": "lobby", "body": "from http"}, "h-1")
    assert status == 200 and ack == {"t": "ack", "id": "h-1", "ok": True, "dup": False, "d": ack["d"]}
    assert ack["d"]["seq"] == 1 and "Idempotent-Replayed" not in response
    [msg] = await socket.frames("msg", 1)
    assert msg["d"]["id"] == "h-1" and msg["d"]["body"] == "from http"
    # The replay answers the same ack and broadcasts nothing.
    status, again, response = await api.post("room.post", {"room": "lobby", "body": "from http"}, "h-1")
    assert status == 200 and again["dup"] is True and again["d"] == ack["d"]
    assert response["Idempotent-Replayed"] == "true"
    assert await socket.nothing_more()
    assert len(await rows()) == 1


async def test_duplicates_over_http_apply_once(api_as):
    user, api = await api_as()
    assert (await api.post("room.join", {"room": "lobby"}))[0] == 200
    answers = [await api.post("room.post", {"room": "lobby", "body": "x"}, "dup-key") for _ in range(4)]
    assert [status for status, _, _ in answers] == [200] * 4
    assert [ack["dup"] for _, ack, _ in answers] == [False, True, True, True]
    assert len({json.dumps(ack["d"]) for _, ack, _ in answers}) == 1
    assert len(await rows()) == 1


async def test_eight_concurrent_requests_with_one_key_apply_once(api_as):
    user, api = await api_as()
    await api.post("room.join", {"room": "lobby"})
    answers = await asyncio.gather(
        *(api.post("room.post", {"room": "lobby", "body": "once"}, "same") for _ in range(8))
    )
    assert [status for status, _, _ in answers] == [200] * 8, answers
    assert sorted(ack["dup"] for _, ack, _ in answers) == [False] + [True] * 7
    assert len({json.dumps(ack["d"]) for _, ack, _ in answers}) == 1
    assert [r["seq"] for r in await rows()] == [1]


async def test_socket_then_http_is_one_command(api_as, open_clients):
    user, api = await api_as()
    socket = await open_clients(user)
    await socket.join("lobby")
    first = await socket.call("room.post", {"room": "lobby", "body": "both"}, id="cross-1")
    status, ack, response = await api.post("room.post", {"room": "lobby", "body": "both"}, "cross-1")
    assert status == 200 and ack["dup"] and ack["d"] == first["d"] and response["Idempotent-Replayed"] == "true"
    assert len(await rows()) == 1


async def test_http_then_socket_is_one_command(api_as, open_clients):
    user, api = await api_as()
    socket = await open_clients(user)
    await socket.join("lobby")
    _, first, _ = await api.post("room.post", {"room": "lobby", "body": "both"}, "cross-2")
    again = await socket.call("room.post", {"room": "lobby", "body": "both"}, id="cross-2")
    assert again["ok"] and again["dup"] and again["d"] == first["d"]
    assert len(await rows()) == 1


async def test_same_key_from_another_user_is_another_command(api_as):
    _, ana = await api_as()
    _, bob = await api_as()
    for api in (ana, bob):
        await api.post("room.join", {"room": "lobby"})
    a = await ana.post("room.post", {"room": "lobby", "body": "hi"}, "shared")
    b = await bob.post("room.post", {"room": "lobby", "body": "hi"}, "shared")
    assert not a[1]["dup"] and not b[1]["dup"] and {a[1]["d"]["seq"], b[1]["d"]["seq"]} == {1, 2}


async def test_key_reused_with_another_body_is_422_and_applies_nothing(api_as):
    _, api = await api_as()
    await api.post("room.join", {"room": "lobby"})
    await api.post("room.post", {"room": "lobby", "body": "first"}, "k")
    status, ack, _ = await api.post("room.post", {"room": "lobby", "body": "second"}, "k")
    assert status == 422 and ack["ok"] is False and ack["error"]["code"] == "id_reused" and ack["id"] == "k"
    assert [r["body"] for r in await rows()] == ["first"]


@pytest.mark.parametrize(
    "t, d, code",
    [
        ("room.post", {"room": "lobby", "body": "   "}, "invalid"),
        ("room.post", {"room": "Not A Slug", "body": "x"}, "invalid"),
        ("room.post", [1, 2], "invalid"),
        ("no.such.type", {}, "unknown_type"),
    ],
)
async def test_refusals_of_the_command_are_400_acks(api_as, t, d, code):
    _, api = await api_as()
    await api.post("room.join", {"room": "lobby"})
    status, ack, _ = await api.post(t, d, "refused-1")
    assert status == 400 and ack["t"] == "ack" and ack["error"]["code"] == code and ack["error"]["retry"] is False
    assert await rows() == []
    # A refusal is not remembered: the same key with a fixed command applies.
    status, ack, _ = await api.post("room.post", {"room": "lobby", "body": "fixed"}, "refused-1")
    assert status == 200 and not ack["dup"]


@pytest.mark.parametrize(
    "headers, body, status, code",
    [
        ({}, None, 400, "bad_frame"),  # an exactly-once type without a key
        ({"Idempotency-Key": "has space"}, None, 400, "bad_frame"),
        ({"Idempotency-Key": "x" * 65}, None, 400, "bad_frame"),
        ({"Idempotency-Key": "k1"}, "not json", 400, "bad_frame"),
        ({"Idempotency-Key": "k1"}, "[1]", 400, "bad_frame"),
        ({"Idempotency-Key": "k1"}, '{"t": "room.post", "d": {"room": "lobby", "body": NaN}}', 400, "bad_frame"),
        ({"Idempotency-Key": "k1"}, '{"d": {}}', 400, "invalid"),
    ],
)
async def test_what_is_no_command_is_400(api_as, headers, body, status, code):
    _, api = await api_as()
    await api.post("room.join", {"room": "lobby"})
    got, answer, _ = await api.post("room.post", {"room": "lobby", "body": "x"}, body=body, **headers)
    assert got == status and answer["error"]["code"] == code
    assert await rows() == []


async def test_idempotent_types_need_no_key(api_as):
    _, api = await api_as()
    status, ack, _ = await api.post("room.join", {"room": "lobby"})
    assert status == 200 and ack["ok"] and ack["d"]["room"] == "lobby" and ack["id"]


async def test_body_over_the_frame_limit_is_413(api_as, settings):
    _, api = await api_as()
    settings.MESSAGING = {**settings.MESSAGING, "MAX_FRAME_BYTES": 200}
    status, answer, _ = await api.post("room.post", {"room": "lobby", "body": "x" * 300}, "big")
    assert status == 413 and answer["error"]["code"] == "too_large"


async def test_forbidden_is_403(api_as):
    _, api = await api_as()
    status, ack, _ = await api.post("room.post", {"room": "not-joined", "body": "x"}, "f-1")
    assert status == 403 and ack["error"]["code"] == "forbidden"


async def test_in_progress_is_409_with_retry_after(api_as, settings, redis_client):
    user, api = await api_as()
    await api.post("room.join", {"room": "lobby"})
    # With the posts' statement after the claims (beside them, it would apply the post: messaging/core/pipeline.py).
    settings.MESSAGING = {**settings.MESSAGING, "IN_PROGRESS_WAIT": 0.2, "EARLY_STATEMENT": False}
    reset_claim_store()
    # Another attempt (of a process that is still running it) holds the claim.
    redis_client.set(claim_key(user.pk, "busy"), b"c:another-owner", px=30_000)
    status, ack, response = await api.post("room.post", {"room": "lobby", "body": "x"}, "busy")
    assert status == 409 and ack["error"]["code"] == "in_progress" and ack["error"]["retry"] is True
    assert int(response["Retry-After"]) >= 1
    assert await rows() == []


async def test_rate_limited_is_429_with_retry_after(api_as, settings):
    settings.MESSAGING = {**settings.MESSAGING, "RATE_BURST": 2, "RATE_PER_SECOND": 0.01}
    _, api = await api_as()
    answers = [await api.post("room.join", {"room": "lobby"}) for _ in range(3)]
    assert [status for status, _, _ in answers] == [200, 200, 429]
    _, ack, response = answers[2]
    assert ack["error"]["code"] == "rate_limited" and int(response["Retry-After"]) >= 1


async def test_unavailable_is_503_with_retry_after(api_as, broken_type):
    _, api = await api_as()
    status, ack, response = await api.post(broken_type, {}, "b-1")
    assert status == 503 and ack["error"]["code"] == "unavailable" and response["Retry-After"] == "1"
    assert not await database_sync_to_async(CommandRecord.objects.filter(command_id="b-1").exists)()


async def test_without_credentials_is_401(make_user):
    status, answer, response = await Api().post("room.join", {"room": "lobby"})
    assert status == 401 and answer["t"] == "error" and response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("authorization", ["Bearer msg_wrong", "Bearer ", "Bearer x y", "Basic dXNlcjpwYXNz"])
async def test_a_wrong_token_is_401(api_as, authorization):
    user, _ = await api_as()
    api = Api()
    status, _, _ = await api.post("room.join", {"room": "lobby"}, Authorization=authorization)
    assert status == 401


async def test_a_revoked_token_is_401(make_user):
    user = await make_user()
    row, token = await database_sync_to_async(create_token)(user)
    api = Api(token)
    assert (await api.post("room.join", {"room": "lobby"}))[0] == 200
    await database_sync_to_async(row.revoke)()
    assert (await api.post("room.join", {"room": "lobby"}))[0] == 401


async def test_a_token_needs_no_csrf_and_notes_its_use(make_user):
    user = await make_user()
    row, token = await database_sync_to_async(create_token)(user)
    api = Api(token, AsyncClient(enforce_csrf_checks=True))
    status, ack, _ = await api.post("room.join", {"room": "lobby"})
    assert status == 200 and ack["ok"]
    await database_sync_to_async(row.refresh_from_db)()
    assert row.last_used_at is not None


async def test_the_token_is_never_stored_in_clear(make_user):
    user = await make_user()
    _, token = await database_sync_to_async(create_token)(user, "bot")
    stored = await database_sync_to_async(lambda: list(ApiToken.objects.values()))()
    assert stored and all(
        token not in str(value) and token[12:] not in str(value) for row in stored for value in row.values()
    )


async def test_session_needs_its_csrf_token(make_user):
    user = await make_user()
    client = AsyncClient(enforce_csrf_checks=True)
    await database_sync_to_async(client.force_login)(user)
    api = Api(client=client)
    status, answer, _ = await api.post("room.join", {"room": "lobby"})
    assert status == 403 and "CSRF" in answer["error"]["message"]
    # The page's way: the csrftoken cookie's value in X-CSRFToken.
    await client.get("/login/")
    csrf = client.cookies["csrftoken"].value
    status, ack, _ = await api.post("room.join", {"room": "lobby"}, **{"X-CSRFToken": csrf})
    assert status == 200 and ack["ok"], ack


@pytest.mark.parametrize(
    "backend", ["django.contrib.auth.backends.ModelBackend", "django.contrib.auth.backends.AllowAllUsersModelBackend"]
)
async def test_a_user_made_inactive_is_refused_at_once_with_either_credential(make_user, settings, backend):
    settings.AUTHENTICATION_BACKENDS = [backend]
    user = await make_user()
    client = AsyncClient(enforce_csrf_checks=True)
    await database_sync_to_async(client.force_login)(user)
    await client.get("/login/")
    by_session = Api(client=client)
    by_session.headers = {"X-CSRFToken": client.cookies["csrftoken"].value}
    by_token = Api(await new_token(user))
    for api in (by_session, by_token):
        assert (await api.post("room.join", {"room": "lobby"}))[0] == 200
    user.is_active = False
    await database_sync_to_async(user.save)()
    for api in (by_session, by_token):
        status, answer, _ = await api.post("room.join", {"room": "lobby"})
        assert status == 401 and answer["error"]["code"] == "unauthenticated"


async def test_get_is_405(api_as):
    _, api = await api_as()
    response = await api.client.get("/api/commands", headers=api.headers)
    assert response.status_code == 405 and response["Allow"] == "POST"


async def test_with_redis_stopped_http_is_still_exactly_once(api_as, settings, own_redis, open_clients):
    settings.MESSAGING = {**settings.MESSAGING, "REDIS_URL": own_redis.url, "REDIS_TIMEOUT": 0.2}
    reset_claim_store()
    user, api = await api_as()
    await api.post("room.join", {"room": "lobby"})
    _, before, _ = await api.post("room.post", {"room": "lobby", "body": "known"}, "r-1")
    own_redis.stop()
    answers = [await api.post("room.post", {"room": "lobby", "body": "known"}, "r-1")]
    answers += await asyncio.gather(*(api.post("room.post", {"room": "lobby", "body": "new"}, "r-2") for _ in range(8)))
    assert [status for status, _, _ in answers] == [200] * 9, answers
    assert answers[0][1]["dup"] and answers[0][1]["d"] == before["d"]
    assert sorted(ack["dup"] for _, ack, _ in answers[1:]) == [False] + [True] * 7
    assert [r["body"] for r in await rows()] == ["known", "new"]
    reset_claim_store()


async def test_openapi_document_is_served(api_as):
    response = await AsyncClient().get("/api/openapi.json")
    assert response.status_code == 200
    document = json.loads(response.content)
    assert document["openapi"].startswith("3.") and "/api/commands" in document["paths"]


async def test_the_buckets_per_credential_are_bounded(make_user, settings):
    from messaging.transport.http import credentials

    settings.MESSAGING = {**settings.MESSAGING, "RATE_WINDOW_KEYS": 2, "RATE_BURST": 1, "RATE_PER_SECOND": 0.01}
    credentials._buckets.clear()
    apis = [Api(await new_token(await make_user())) for _ in range(3)]
    for api in apis:
        assert (await api.post("room.join", {"room": "lobby"}))[0] == 200
    assert len(credentials._buckets) == 2
    # The first credential's bucket was forgotten (the least recently used), the last one's kept.
    assert (await apis[0].post("room.join", {"room": "lobby"}))[0] == 200
    assert (await apis[2].post("room.join", {"room": "lobby"}))[0] == 429
