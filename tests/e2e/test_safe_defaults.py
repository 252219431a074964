"""A deployed daphne (DEBUG=0) shows no debug page, and with HTTPS=1 behind a
TLS-terminating proxy redirects plain HTTP, sends HSTS and marks its cookies
Secure, while the health check still answers over plain HTTP. Its chat page's
import map, with the manifest's hashed names, is allowed by its hash; its
WebSocket takes only the page's own origin, scheme and port included."""

from __future__ import annotations

import http.client
import os
import re
import urllib.parse
from http.cookies import SimpleCookie

import pytest
import websockets
from asgiref.sync import sync_to_async
from websockets.exceptions import InvalidStatus

from messaging_client import sign_in

from ..support.csp import executed_inline_scripts, policy_of, sha256_source
from ..support.servers import Daphne

pytestmark = [pytest.mark.e2e]

PROXIED_TLS = {"X-Forwarded-Proto": "https", "Host": "127.0.0.1"}


def test_a_deployment_that_forgot_debug_shows_a_bad_host_a_plain_400_not_the_debug_page(server_env, tmp_path):
    forgot = {k: v for k, v in os.environ.items() if k != "DEBUG"}
    server = Daphne({k: v for k, v in server_env.items() if k != "DEBUG"}, log_dir=tmp_path, base_env=forgot).start()
    try:
        status, _, body = server.request("GET", "/login/", headers={"Host": "evil.example"})
    finally:
        server.stop()
    assert status == 400
    assert b"DisallowedHost" not in body and b"Traceback" not in body and b"settings.py" not in body


@pytest.fixture
def https_server(start_daphne):
    return start_daphne(HTTPS="1", PROXY_SSL_HEADER="X-Forwarded-Proto", ready_path="/healthz")


def test_https_redirects_plain_http_except_the_health_check(https_server):
    status, headers, _ = https_server.request("GET", "/login/", headers={"Host": "127.0.0.1"})
    assert status == 301 and headers["location"] == "https://127.0.0.1/login/"
    assert https_server.request("GET", "/healthz")[0] == 200


def test_https_behind_the_proxy_sends_hsts_and_secure_cookies(https_server):
    status, headers, _ = https_server.request("GET", "/login/", headers=PROXIED_TLS)
    assert status == 200
    assert headers["strict-transport-security"] == "max-age=31536000; includeSubDomains; preload"
    assert "csrftoken=" in headers["set-cookie"] and "; Secure" in headers["set-cookie"]


def test_the_import_map_with_the_manifests_hashed_names_is_allowed_by_its_hash(start_daphne):
    server = start_daphne()
    session = sign_in(server.url, "ana")
    status, headers, body = server.request("GET", "/", headers={"Cookie": f"sessionid={session}"})
    assert status == 200
    [import_map] = executed_inline_scripts(body.decode())
    assert re.search(r'"/static/messaging/outbox\.js": "/static/messaging/outbox\.[0-9a-f]{12}\.js"', import_map), (
        import_map
    )
    assert policy_of(headers["content-security-policy"])["script-src"] == ["'self'", sha256_source(import_map)]


async def origin_accepted(server, session: str, origin: str, **headers: str) -> bool:
    try:
        ws = await websockets.connect(
            server.url.replace("http", "ws", 1) + "/ws/",
            additional_headers={"Cookie": f"sessionid={session}", "Origin": origin, **headers},
        )
    except InvalidStatus as refused:
        assert refused.response.status_code == 403
        return False
    await ws.close()
    return True


async def test_the_websocket_origin_is_checked_with_scheme_and_port(start_daphne):
    server = start_daphne()
    session = await sync_to_async(sign_in)(server.url, "ana")
    other_port = f"http://127.0.0.1:{server.port + 1}"
    assert await origin_accepted(server, session, server.url)
    assert not await origin_accepted(server, session, other_port)
    assert not await origin_accepted(server, session, server.url.replace("http", "https", 1))


async def test_behind_a_tls_proxy_the_https_page_connects(https_server):
    session = await sync_to_async(sign_in_over_the_proxy)(https_server)
    https_page = https_server.url.replace("http", "https", 1)
    assert await origin_accepted(https_server, session, https_page, **{"X-Forwarded-Proto": "https"})
    assert not await origin_accepted(https_server, session, https_server.url, **{"X-Forwarded-Proto": "https"})


def sign_in_over_the_proxy(server) -> str:
    """A guest's session through the form, each request as the TLS proxy forwards it."""
    proxied = {"X-Forwarded-Proto": "https", "Host": f"127.0.0.1:{server.port}"}

    def request(method: str, body: str | None = None, **headers: str) -> tuple[int, dict[str, str]]:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            conn.request(method, "/login/", body=body, headers={**proxied, **headers})
            response = conn.getresponse()
            response.read()
            cookies = SimpleCookie()
            for header in response.headers.get_all("Set-Cookie") or ():
                cookies.load(header)
            return response.status, {name: morsel.value for name, morsel in cookies.items()}
        finally:
            conn.close()

    _, cookies = request("GET")
    form = urllib.parse.urlencode({"name": "ana", "csrfmiddlewaretoken": cookies["csrftoken"]})
    status, cookies = request(
        "POST",
        form,
        Cookie=f"csrftoken={cookies['csrftoken']}",
        Origin=f"https://127.0.0.1:{server.port}",
        **{"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 302, status
    return cookies["sessionid"]
