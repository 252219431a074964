"""`POST /api/uploads` and `GET` of its `url` (PROTOCOL.md 1.2, "Files") on real PostgreSQL and Redis.

Requests go through Django's ASGI handler (Django's `AsyncClient`), the
files to a FileSystemStorage in the test's own folder.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from messaging.files.models import Upload
from messaging.transport.tokens import create_token

from ..support.uploads import GIF, JPEG, PDF, PNG, SAMPLES, TEXT, WEBP, upload_headers

pytestmark = [pytest.mark.django_db(transaction=True)]

new_token = database_sync_to_async(lambda user: create_token(user, "test")[1])


@pytest.fixture
def media(settings, tmp_path):
    """The default storage in a folder of the test's own; yields where uploads land."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "media" / "messaging" / "uploads"


def files_in(folder) -> list[str]:
    return sorted(p.name for p in folder.glob("*")) if folder.exists() else []


class Uploader:
    """One user of the HTTP API with a token (or the given headers only)."""

    def __init__(self, user, token: str | None) -> None:
        self.user = user
        self.client = AsyncClient()
        self.auth = {"Authorization": f"Bearer {token}"} if token else {}

    async def upload(self, body: bytes, name: str = "a.png", content_type: str = "image/png", key=None, **headers):
        sent = upload_headers(name, content_type, key, {**self.auth, **headers})
        response = await self.client.post(
            "/api/uploads", data=body, content_type=sent.pop("Content-Type"), headers=sent
        )
        return response.status_code, json.loads(response.content), response

    async def get(self, url: str, **headers):
        response = await self.client.get(url, headers={**self.auth, **headers})
        content = b"".join([chunk async for chunk in response]) if response.streaming else response.content
        return response.status_code, content, response


@pytest.fixture
def uploader(make_user):
    async def make(name: str | None = None) -> Uploader:
        user = await make_user(name)
        return Uploader(user, await new_token(user))

    return make


uploads_of = database_sync_to_async(lambda user: list(Upload.objects.filter(user=user).order_by("created_at")))


async def test_an_upload_is_stored_once_and_its_key_answers_it_again(uploader, media):
    ana = await uploader("ana")
    status, first, response = await ana.upload(PNG, "cat.png", key="u-1")
    assert status == 201 and "Idempotent-Replayed" not in response
    assert first == {
        "upload": first["upload"],
        "name": "cat.png",
        "size": len(PNG),
        "content_type": "image/png",
        "url": f"/api/uploads/{first['upload']}",
    }
    status, again, response = await ana.upload(PNG, "cat.png", key="u-1")
    assert status == 200 and again == first and response["Idempotent-Replayed"] == "true"
    [row] = await uploads_of(ana.user)
    assert str(row.pk) == first["upload"] and row.room_id is None
    assert files_in(media) == [first["upload"]] and (media / first["upload"]).read_bytes() == PNG


async def test_the_same_key_with_other_bytes_is_refused_and_keeps_nothing(uploader, media):
    ana = await uploader()
    status, first, _ = await ana.upload(PNG, key="u-1")
    status, refused, _ = await ana.upload(PNG + b"x", key="u-1")
    assert status == 422 and refused["error"]["code"] == "id_reused"
    assert len(await uploads_of(ana.user)) == 1 and files_in(media) == [first["upload"]]


async def test_one_key_sent_four_times_at_once_keeps_one_upload(uploader, media):
    ana = await uploader()
    answers = await asyncio.gather(*(ana.upload(PNG, key="same") for _ in range(4)))
    assert sorted(status for status, _, _ in answers) == [200, 200, 200, 201]
    assert len({json.dumps(body) for _, body, _ in answers}) == 1
    assert len(await uploads_of(ana.user)) == 1 and len(files_in(media)) == 1


async def test_keys_are_each_users_own(uploader, media):
    ana, bob = await uploader(), await uploader()
    _, a, _ = await ana.upload(PNG, key="k")
    status, b, _ = await bob.upload(PNG, key="k")
    assert status == 201 and a["upload"] != b["upload"]


@pytest.mark.parametrize("content_type", sorted(SAMPLES))
async def test_each_type_the_protocol_names_is_taken_and_served_back(uploader, media, content_type):
    ana = await uploader()
    status, body, _ = await ana.upload(SAMPLES[content_type], "f", content_type)
    assert status == 201 and body["content_type"] == content_type
    status, content, response = await ana.get(body["url"])
    assert status == 200 and content == SAMPLES[content_type]
    assert response["Content-Type"] == content_type and response["X-Content-Type-Options"] == "nosniff"
    inline = content_type.startswith("image/")
    assert response["Content-Disposition"].startswith("inline" if inline else "attachment")


@pytest.mark.parametrize(
    ("body", "content_type", "why"),
    [
        (PNG, "text/plain", "a PNG sent as text"),
        (b"text\x00with a NUL", "text/plain", "text with a NUL byte"),
        (JPEG, "image/png", "a JPEG sent as a PNG"),
        (b"<script>alert(1)</script>", "image/gif", "a script sent as an image"),
        (b"%PDF-1.4", "image/webp", "a PDF sent as WebP"),
        (GIF, "application/zip", "a type not allowed here"),
        (b"<svg onload=alert(1)>", "image/svg+xml", "SVG, not allowed by default"),
        (b"a=1", "application/x-www-form-urlencoded", "a form"),
        (WEBP, "", "no type at all"),
        (PDF, "pdf", "not a type"),
    ],
)
async def test_bytes_not_of_an_allowed_type_they_say_are_refused_and_nothing_kept(
    uploader, media, body, content_type, why
):
    ana = await uploader()
    status, refused, _ = await ana.upload(body, "x", content_type)
    assert status == 415 and refused["error"]["code"] == "unsupported_type", why
    assert await uploads_of(ana.user) == [] and files_in(media) == []


async def test_a_type_the_deployment_allows_is_taken_but_never_shown_inline(uploader, media, settings):
    settings.MESSAGING = {**settings.MESSAGING, "UPLOAD_TYPES": "image/svg+xml, text/html, multipart/form-data"}
    ana = await uploader()
    status, svg, _ = await ana.upload(b"<svg onload=alert(1)></svg>", "x.svg", "image/svg+xml")
    assert status == 201
    status, _, response = await ana.get(svg["url"])
    assert response["Content-Disposition"] == 'attachment; filename="x.svg"'
    assert "sandbox" in response["Content-Security-Policy"] and response["X-Content-Type-Options"] == "nosniff"
    status, html, _ = await ana.upload(b"<html><script>alert(1)</script>", "x.html", "text/html")
    assert status == 201 and (await ana.get(html["url"]))[2]["Content-Disposition"].startswith("attachment")
    # A PNG is still no HTML, and a form never an upload.
    assert (await ana.upload(PNG, "x.html", "text/html"))[0] == 415
    assert (await ana.upload(b"a=1", "f", "multipart/form-data; boundary=x"))[0] == 415


@pytest.mark.parametrize(
    ("header", "why"),
    [
        ("..%2F..%2Fetc%2Fpasswd", "a path up"),
        ("a%2Fb.png", "a slash"),
        ("a%5Cb.png", "a backslash"),
        ("..", "the parent"),
        (".", "the folder"),
        ("%20%20", "blanks"),
        ("a%00.png", "a NUL"),
        ("a%0Ab.png", "a line feed"),
        ("a%1Bb.png", "an escape"),
        ("gpj%E2%80%AEexe.png", "a right-to-left override"),
        ("%FF.png", "not UTF-8"),
        ("x" * 256, "256 characters"),
        ("", "empty"),
    ],
)
async def test_a_name_that_is_a_path_or_hides_what_it_is_is_refused(uploader, media, header, why):
    ana = await uploader()
    sent = upload_headers("x", "image/png", None, ana.auth)
    sent["Upload-Filename"] = header
    response = await ana.client.post("/api/uploads", data=PNG, content_type=sent.pop("Content-Type"), headers=sent)
    assert response.status_code == 400, why
    assert await uploads_of(ana.user) == [] and files_in(media) == []


async def test_a_name_is_url_decoded_and_kept_as_given(uploader, media):
    ana = await uploader()
    status, body, _ = await ana.upload(PNG, "été 2026 (1).png")
    assert status == 201 and body["name"] == "été 2026 (1).png"
    _, _, response = await ana.get(body["url"])
    assert response["Content-Disposition"] == "inline; filename*=utf-8''%C3%A9t%C3%A9%202026%20%281%29.png"
    assert files_in(media) == [body["upload"]]


async def test_a_body_over_max_upload_bytes_is_refused_and_nothing_kept(uploader, media, settings):
    settings.MESSAGING = {**settings.MESSAGING, "MAX_UPLOAD_BYTES": 1000}
    ana = await uploader()
    status, refused, _ = await ana.upload(PNG + bytes(1000))
    assert status == 413 and refused["error"]["code"] == "too_large"
    assert (await ana.upload(PNG + bytes(1000 - len(PNG))))[0] == 201
    assert len(await uploads_of(ana.user)) == 1 and len(files_in(media)) == 1


async def test_credentials_are_those_of_the_commands(uploader, media, make_user):
    ana = await uploader()
    nobody = Uploader(ana.user, None)
    assert (await nobody.upload(PNG))[0] == 401
    user = await make_user()
    session = AsyncClient(enforce_csrf_checks=True)
    await session.aforce_login(user)
    sent = upload_headers("a.png", "image/png")
    refused = await session.post("/api/uploads", data=PNG, content_type=sent.pop("Content-Type"), headers=sent)
    assert refused.status_code == 403
    await session.get("/login/")
    sent = upload_headers("a.png", "image/png", extra={"X-CSRFToken": session.cookies["csrftoken"].value})
    taken = await session.post("/api/uploads", data=PNG, content_type=sent.pop("Content-Type"), headers=sent)
    assert taken.status_code == 201
    assert await uploads_of(ana.user) == []


async def test_a_missing_or_bad_key_is_refused(uploader, media):
    ana = await uploader()
    sent = upload_headers("a.png", "image/png", None, ana.auth)
    del sent["Idempotency-Key"]
    response = await ana.client.post("/api/uploads", data=PNG, content_type=sent.pop("Content-Type"), headers=sent)
    assert response.status_code == 400
    assert (await ana.upload(PNG, key="not a key!"))[0] == 400
    assert files_in(media) == []


async def test_uploads_not_posted_are_bounded_per_user_in_count(uploader, media, settings):
    settings.MESSAGING = {**settings.MESSAGING, "UPLOADS_PENDING_PER_USER": 2}
    ana, bob = await uploader(), await uploader()
    assert [(await ana.upload(PNG))[0] for _ in range(2)] == [201, 201]
    status, refused, response = await ana.upload(PNG)
    assert status == 429 and refused["error"]["code"] == "rate_limited" and int(response["Retry-After"]) > 3600
    # One user's bound is no other's.
    assert (await bob.upload(PNG))[0] == 201
    assert len(await uploads_of(ana.user)) == 2 and len(files_in(media)) == 3


async def test_uploads_not_posted_are_bounded_per_user_in_bytes(uploader, media, settings):
    settings.MESSAGING = {**settings.MESSAGING, "UPLOADS_PENDING_BYTES_PER_USER": 3 * len(PDF)}
    ana = await uploader()
    assert [(await ana.upload(PDF, "f.pdf", "application/pdf"))[0] for _ in range(3)] == [201, 201, 201]
    assert (await ana.upload(PDF, "f.pdf", "application/pdf"))[0] == 429
    assert len(await uploads_of(ana.user)) == 3 and len(files_in(media)) == 3


async def test_uploads_share_the_commands_rate_limits(uploader, media, settings):
    settings.MESSAGING = {**settings.MESSAGING, "RATE_BURST": 2, "RATE_PER_SECOND": 0.01}
    ana = await uploader()
    answers = [(await ana.upload(TEXT, "t.txt", "text/plain"))[0] for _ in range(3)]
    assert answers == [201, 201, 429]


async def test_a_pending_upload_is_its_uploaders_alone(uploader, media):
    ana, bob = await uploader(), await uploader()
    _, body, _ = await ana.upload(PNG)
    assert (await ana.get(body["url"]))[0] == 200
    assert (await bob.get(body["url"]))[0] == 404
    assert (await Uploader(None, None).get(body["url"]))[0] == 404
    assert (await ana.get(f"/api/uploads/{uuid.uuid4()}"))[0] == 404
    status, body, response = await ana.get("/api/uploads/null,null")
    assert status == 404 and response["Content-Type"] == "application/json"


async def test_a_range_a_revalidation_and_a_head(uploader, media):
    ana = await uploader()
    _, body, _ = await ana.upload(PDF, "f.pdf", "application/pdf")
    status, part, response = await ana.get(body["url"], Range="bytes=1-3")
    assert status == 206 and part == PDF[1:4] and response["Content-Range"] == f"bytes 1-3/{len(PDF)}"
    status, tail, _ = await ana.get(body["url"], Range="bytes=-2")
    assert status == 206 and tail == PDF[-2:]
    assert (await ana.get(body["url"], Range=f"bytes={len(PDF)}-"))[0] == 416
    status, _, response = await ana.get(body["url"])
    assert (await ana.get(body["url"], If_None_Match=response["ETag"]))[0] == 304
    head = await ana.client.head(body["url"], headers=ana.auth)
    assert head.status_code == 200 and head["Content-Length"] == str(len(PDF))
