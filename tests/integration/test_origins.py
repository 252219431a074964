"""The Origin check in front of the real consumer, with a real login's cookie:
a page on another port or scheme of an allowed host is refused before the
consumer sees the socket; trusted origins and a proxy's TLS header are honoured."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings

from messaging.transport.gate import SocketGate
from messaging.transport.routing import websocket_urlpatterns
from project.asgi import application

from .conftest import rows
from .test_hostile import signed_in_session

pytestmark = [pytest.mark.django_db(transaction=True)]


async def handshake(app, user, origin: str, host: str = "127.0.0.1:8000", **extra: str) -> bool:
    """Whether the handshake was accepted; an accepted one joins a room, to show the socket works."""
    key = await database_sync_to_async(signed_in_session)(user)
    headers = [
        (b"origin", origin.encode()),
        (b"host", host.encode()),
        (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={key}".encode()),
    ]
    headers += [(name.lower().replace("_", "-").encode(), value.encode()) for name, value in extra.items()]
    comm = WebsocketCommunicator(app, "/ws/", headers=headers)
    connected, _ = await comm.connect()
    if connected:
        await comm.send_json_to({"id": "j1", "t": "room.join", "d": {"room": "lobby"}})
        assert (await comm.receive_json_from(timeout=5))["ok"]
    await comm.disconnect()
    return connected


def deployed_stack():
    """The demo's websocket stack, built now, under the test's settings."""
    return SocketGate(URLRouter(websocket_urlpatterns))


@pytest.mark.parametrize("origin", ["http://127.0.0.1:8001", "https://127.0.0.1:8000", "http://127.0.0.1"])
async def test_another_port_or_scheme_of_an_allowed_host_is_refused(make_user, origin):
    assert not await handshake(application, await make_user(), origin)
    assert await rows() == []


async def test_the_pages_own_origin_is_accepted(make_user):
    assert await handshake(application, await make_user(), "http://127.0.0.1:8000")


async def test_trusted_origins_replace_the_handshakes_own(make_user, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.com"]
    app, user = deployed_stack(), await make_user()
    assert await handshake(app, user, "https://chat.example.com", host="10.0.0.5:8000")
    assert not await handshake(app, user, "http://127.0.0.1:8000")


async def test_behind_a_proxy_its_tls_header_makes_the_page_https(make_user, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    app, user = deployed_stack(), await make_user()
    assert await handshake(app, user, "https://127.0.0.1:8000", X_FORWARDED_PROTO="https")
    assert not await handshake(app, user, "http://127.0.0.1:8000", X_FORWARDED_PROTO="https")
    assert not await handshake(app, user, "https://127.0.0.1:8000")
