"""API tokens: `messaging_token`, the admin, the limit per user, and tokens on the WebSocket handshake."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from messaging.models import ApiToken
from messaging.transport.auth import AuthMiddlewareStack
from messaging.transport.consumers import ChatConsumer
from messaging.transport.tokens import create_token, digest, user_of_token

pytestmark = [pytest.mark.django_db(transaction=True)]


def make_token(username: str) -> str:
    out = StringIO()
    call_command("messaging_token", username, "--name", "bot", stdout=out, stderr=StringIO())
    return out.getvalue().strip()


def test_messaging_token_prints_a_token_once_and_stores_its_hash(django_user_model):
    user = django_user_model.objects.create_user(username="bot")
    token = make_token("bot")
    assert token.startswith("msg_") and len(token) > 40
    [row] = ApiToken.objects.filter(user=user)
    assert row.digest == digest(token) and row.name == "bot" and token.startswith(row.prefix)
    assert user_of_token(token) == user
    assert make_token("bot") != token


def test_messaging_token_revokes_by_prefix(django_user_model):
    user = django_user_model.objects.create_user(username="bot")
    token = make_token("bot")
    other = make_token("bot")
    call_command(
        "messaging_token", "bot", "--revoke", ApiToken.objects.get(digest=digest(token)).prefix, stderr=StringIO()
    )
    assert user_of_token(token) is None and user_of_token(other) == user
    call_command("messaging_token", "bot", "--revoke", other, stderr=StringIO())
    assert user_of_token(other) is None
    with pytest.raises(CommandError):
        call_command("messaging_token", "bot", "--revoke", "msg_nothing", stderr=StringIO())


def test_messaging_token_of_an_unknown_user_fails(db):
    with pytest.raises(CommandError):
        call_command("messaging_token", "nobody", stdout=StringIO())


def test_tokens_per_user_are_bounded(django_user_model, settings):
    settings.MESSAGING = {**settings.MESSAGING, "API_TOKENS_PER_USER": 2}
    user = django_user_model.objects.create_user(username="bot")
    first, _second = make_token("bot"), make_token("bot")
    with pytest.raises(CommandError, match="API_TOKENS_PER_USER"):
        make_token("bot")
    assert ApiToken.objects.filter(user=user).count() == 2
    ApiToken.objects.get(digest=digest(first)).revoke()
    assert make_token("bot")


def test_an_inactive_user_s_token_signs_nobody_in(django_user_model):
    user = django_user_model.objects.create_user(username="bot")
    _, token = create_token(user)
    user.is_active = False
    user.save()
    assert user_of_token(token) is None


def admin_client(django_user_model) -> Client:
    admin = django_user_model.objects.create_superuser(username="admin", password="pw")
    client = Client()
    client.force_login(admin)
    return client


def set_cookies(response) -> str:
    return "\n".join(morsel.OutputString() for morsel in response.cookies.values())


def test_the_admin_shows_a_new_token_once_on_its_own_page_and_in_no_cookie(django_user_model):
    client = admin_client(django_user_model)
    bot = django_user_model.objects.create_user(username="bot")
    added = client.post("/admin/messaging/apitoken/add/", {"user": bot.pk, "name": "from admin"})
    [row] = ApiToken.objects.filter(user=bot)
    page_url = f"/admin/messaging/apitoken/{row.pk}/token/"
    assert added.status_code == 302 and added["Location"] == page_url
    assert row.digest is None, "no token exists before its page shows it"

    # A GET (another site's link, a prefetch) shows the button and makes nothing.
    landing = client.get(page_url)
    assert landing.status_code == 200 and "Show the token" in landing.content.decode()
    row.refresh_from_db()
    assert row.digest is None
    page = client.post(page_url)
    assert page.status_code == 200 and "no-store" in page["Cache-Control"]
    token = re.search(r"msg_[A-Za-z0-9_-]{40,}", page.content.decode()).group(0)
    row.refresh_from_db()
    assert row.digest == digest(token) and token.startswith(row.prefix) and user_of_token(token) == bot
    # In no cookie the admin set, the messages framework's included, nor in any message kept for later.
    assert token not in set_cookies(added) + set_cookies(page)
    assert token not in "".join(morsel.value for morsel in client.cookies.values())
    assert token not in client.get("/admin/messaging/apitoken/").content.decode()

    # The page cannot be shown again: a reload says it was shown, and the token stays the one shown.
    again = client.post(page_url)
    assert again.status_code == 200 and "no-store" in again["Cache-Control"]
    assert token not in again.content.decode() and "shown already" in again.content.decode()
    assert not re.search(r"msg_[A-Za-z0-9_-]{40,}", again.content.decode())
    row.refresh_from_db()
    assert row.digest == digest(token)


def test_the_admin_revokes_a_token(django_user_model):
    client = admin_client(django_user_model)
    bot = django_user_model.objects.create_user(username="bot")
    row, token = create_token(bot, "bot")
    client.post("/admin/messaging/apitoken/", {"action": "revoke", "_selected_action": [row.pk]})
    row.refresh_from_db()
    assert row.revoked_at is not None and user_of_token(token) is None
    # A revoked token's page shows nothing, even one never shown.
    client.post("/admin/messaging/apitoken/add/", {"user": bot.pk, "name": "never shown"})
    pending = ApiToken.objects.get(name="never shown")
    client.post("/admin/messaging/apitoken/", {"action": "revoke", "_selected_action": [pending.pk]})
    assert "shown already" in client.post(f"/admin/messaging/apitoken/{pending.pk}/token/").content.decode()
    pending.refresh_from_db()
    assert pending.digest is None


def test_the_admin_sets_an_expiry_and_lists_last_use_and_expiry(django_user_model):
    client = admin_client(django_user_model)
    bot = django_user_model.objects.create_user(username="bot")
    until = timezone.now() + timedelta(days=30)
    added = client.post(
        "/admin/messaging/apitoken/add/",
        {
            "user": bot.pk,
            "name": "monthly",
            "expires_at_0": until.strftime("%Y-%m-%d"),
            "expires_at_1": until.strftime("%H:%M:%S"),
        },
    )
    assert added.status_code == 302
    token = re.search(r"msg_[A-Za-z0-9_-]{40,}", client.post(added["Location"]).content.decode()).group(0)
    row = ApiToken.objects.get(digest=digest(token))
    assert abs(row.expires_at - until) < timedelta(seconds=1)
    assert user_of_token(token) == bot
    listing = client.get("/admin/messaging/apitoken/").content.decode()
    assert "Last used at" in listing and "Expires at" in listing
    assert re.search(r'<td class="field-last_used_at[^"]*">(?!-)', listing), "the last use is listed"


def test_the_admin_refuses_an_expiry_in_the_past_and_makes_nothing(django_user_model):
    client = admin_client(django_user_model)
    bot = django_user_model.objects.create_user(username="bot")
    past = timezone.now() - timedelta(minutes=1)
    refused = client.post(
        "/admin/messaging/apitoken/add/",
        {"user": bot.pk, "expires_at_0": past.strftime("%Y-%m-%d"), "expires_at_1": past.strftime("%H:%M:%S")},
    )
    assert refused.status_code == 200 and "The expiry must be in the future." in refused.content.decode()
    assert not ApiToken.objects.exists()


def test_an_expired_token_signs_nobody_in_and_leaves_room_for_another(django_user_model, settings):
    settings.MESSAGING = {**settings.MESSAGING, "API_TOKENS_PER_USER": 1}
    user = django_user_model.objects.create_user(username="bot")
    row, token = create_token(user, expires_at=timezone.now() + timedelta(hours=1))
    assert user_of_token(token) == user
    ApiToken.objects.filter(pk=row.pk).update(expires_at=timezone.now())
    assert user_of_token(token) is None
    assert user_of_token(create_token(user)[1]) == user


@pytest.mark.parametrize(
    "given, lasting",
    [
        ("90d", timedelta(days=90)),
        ("12h", timedelta(hours=12)),
        ("30m", timedelta(minutes=30)),
        ("3600s", timedelta(hours=1)),
        ("2w", timedelta(weeks=2)),
        ("P30D", timedelta(days=30)),
    ],
)
def test_messaging_token_makes_a_token_that_expires(django_user_model, given, lasting):
    user = django_user_model.objects.create_user(username="bot")
    out, err = StringIO(), StringIO()
    before = timezone.now()
    call_command("messaging_token", "bot", "--expires-in", given, stdout=out, stderr=err)
    token = out.getvalue().strip()
    row = ApiToken.objects.get(digest=digest(token))
    assert before + lasting <= row.expires_at <= timezone.now() + lasting
    assert "expires at" in err.getvalue() and user_of_token(token) == user


@pytest.mark.parametrize("given", ["0d", "-5m", "tomorrow", "10y", "3651d", "", "9" * 40 + "d"])
def test_messaging_token_refuses_a_bad_expiry_and_makes_nothing(django_user_model, given):
    django_user_model.objects.create_user(username="bot")
    with pytest.raises(CommandError, match=r"--expires-in '.*': "):
        call_command("messaging_token", "bot", f"--expires-in={given}", stdout=StringIO(), stderr=StringIO())
    assert not ApiToken.objects.exists()


async def test_a_socket_signs_in_with_a_token(make_user):
    user = await make_user("bot")
    _, token = await database_sync_to_async(create_token)(user)
    for authorization, signed_in in ((f"Bearer {token}", True), ("Bearer msg_wrong", False)):
        comm = WebsocketCommunicator(
            AuthMiddlewareStack(ChatConsumer.as_asgi()), "/ws/", headers=[(b"authorization", authorization.encode())]
        )
        connected, _ = await comm.connect(timeout=10)
        assert connected
        if signed_in:
            await comm.send_json_to({"id": "j", "t": "room.join", "d": {"room": "lobby"}})
            ack = await comm.receive_json_from(timeout=10)
            assert ack["t"] == "ack" and ack["ok"]
        else:
            assert (await comm.receive_output(timeout=10))["code"] == 4401
        await comm.disconnect()
