"""API tokens: `messaging_token`, the admin, the limit per user, and tokens on the WebSocket handshake."""
from __future__ import annotations

import re
from io import StringIO

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.management import CommandError, call_command
from django.test import Client

from messaging.transport.auth import AuthMiddlewareStack
from messaging.transport.consumers import ChatConsumer
from messaging.models import ApiToken
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
    call_command("messaging_token", "bot", "--revoke", ApiToken.objects.get(digest=digest(token)).prefix,
                 stderr=StringIO())
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
    first, second = make_token("bot"), make_token("bot")
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


def test_admin_creates_a_token_shown_once_and_revokes_it(django_user_model):
    admin = django_user_model.objects.create_superuser(username="admin", password="pw")
    bot = django_user_model.objects.create_user(username="bot")
    client = Client()
    client.force_login(admin)
    response = client.post("/admin/messaging/apitoken/add/", {"user": bot.pk, "name": "from admin"}, follow=True)
    assert response.status_code == 200
    shown = re.search(r"msg_[A-Za-z0-9_-]+", response.content.decode())
    assert shown
    [row] = ApiToken.objects.filter(user=bot)
    assert row.digest == digest(shown.group(0)) and user_of_token(shown.group(0)) == bot
    # The list never shows it again.
    listing = client.get("/admin/messaging/apitoken/").content.decode()
    assert shown.group(0) not in listing and row.prefix in listing
    client.post("/admin/messaging/apitoken/", {"action": "revoke", "_selected_action": [row.pk]})
    row.refresh_from_db()
    assert row.revoked_at is not None and user_of_token(shown.group(0)) is None


async def test_a_socket_signs_in_with_a_token(make_user):
    user = await make_user("bot")
    _, token = await database_sync_to_async(create_token)(user)
    for authorization, signed_in in ((f"Bearer {token}", True), ("Bearer msg_wrong", False)):
        comm = WebsocketCommunicator(AuthMiddlewareStack(ChatConsumer.as_asgi()), "/ws/",
                                     headers=[(b"authorization", authorization.encode())])
        connected, _ = await comm.connect(timeout=10)
        assert connected
        if signed_in:
            await comm.send_json_to({"id": "j", "t": "room.join", "d": {"room": "lobby"}})
            ack = await comm.receive_json_from(timeout=10)
            assert ack["t"] == "ack" and ack["ok"]
        else:
            assert (await comm.receive_output(timeout=10))["code"] == 4401
        await comm.disconnect()
