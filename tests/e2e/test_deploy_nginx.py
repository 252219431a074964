"""The app deployed as docs/OPERATIONS.md says: behind Debian's nginx with the site file
of deploy/nginx/ itself, served by daphne or by gunicorn with uvicorn's workers
(deploy/gunicorn.conf.py), `DEBUG=0`, static files collected.

Through nginx: the sign-in form, a static file from disk, a WebSocket that
joins and posts, an HTTP command, an event stream (unbuffered), and the client address the app keys its
limits on (TRUSTED_PROXIES names nginx; clients connect from other loopback
addresses, and one writes an X-Forwarded-For of its own).
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import urllib.parse
from http.cookies import SimpleCookie

import pytest
import redis
import websockets

from messaging.ids import time_ordered_id

from ..support.nginx import Nginx
from ..support.servers import ROOT, Gunicorn

pytestmark = [pytest.mark.e2e]

# nginx itself is the only proxy the app believes.
BEHIND_NGINX = {"TRUSTED_PROXIES": "127.0.0.1", "SIGNIN_RATE": "2", "SIGNIN_RATE_WINDOW": str(10**7)}


@pytest.fixture(params=["daphne", "gunicorn"])
def deployed(request, server_env, start_daphne, static_root, tmp_path):
    """nginx in front of one daphne process, or of gunicorn with two uvicorn workers."""
    if request.param == "daphne":
        server = start_daphne(**BEHIND_NGINX)
    else:
        server = Gunicorn(
            {**server_env, **BEHIND_NGINX, "GUNICORN_WORKERS": "2"},
            log_dir=tmp_path,
            args=("-c", str(ROOT / "deploy" / "gunicorn.conf.py")),
        ).start()
    nginx = Nginx(tmp_path, server.port, static_root).start()
    yield nginx
    nginx.stop()
    if request.param == "gunicorn":
        server.stop()


def request(
    nginx: Nginx,
    method: str,
    path: str,
    *,
    source: str = "127.0.0.2",
    body: str | None = None,
    headers: dict | None = None,
) -> tuple[int, http.client.HTTPMessage, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", nginx.port, timeout=20, source_address=(source, 0))
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def cookies_of(headers: http.client.HTTPMessage) -> dict[str, str]:
    jar = SimpleCookie()
    for value in headers.get_all("Set-Cookie") or []:
        jar.load(value)
    return {name: morsel.value for name, morsel in jar.items()}


def sign_in(
    nginx: Nginx, name: str, *, source: str = "127.0.0.2", forwarded_for: str | None = None
) -> tuple[int, dict]:
    """The guest form through nginx: the POST's status and the cookies it set (sessionid, csrftoken)."""
    status, headers, _ = request(nginx, "GET", "/login/", source=source)
    assert status == 200
    cookies = cookies_of(headers)
    extra = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    form = urllib.parse.urlencode({"name": name, "csrfmiddlewaretoken": cookies["csrftoken"]})
    status, headers, _ = request(
        nginx,
        "POST",
        "/login/",
        source=source,
        body=form,
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": f"csrftoken={cookies['csrftoken']}",
            "Origin": nginx.url,
            "Referer": nginx.url + "/login/",
            **extra,
        },
    )
    return status, {**cookies, **cookies_of(headers)}


def test_the_page_and_its_static_files_come_through_nginx(deployed):
    status, cookies = sign_in(deployed, "ana")
    assert status == 302 and cookies.get("sessionid")
    status, _, page = request(deployed, "GET", "/", headers={"Cookie": f"sessionid={cookies['sessionid']}"})
    assert status == 200
    asset = re.search(rb"/static/messaging/[\w.-]+\.css", page).group().decode()
    status, headers, _ = request(deployed, "GET", asset)
    # Served by nginx from STATIC_ROOT, with the site file's caching.
    assert status == 200 and "immutable" in headers["Cache-Control"]


async def test_a_socket_and_an_http_command_through_nginx(deployed):
    status, cookies = sign_in(deployed, "bob")
    assert status == 302
    ws = await websockets.connect(
        deployed.url.replace("http", "ws") + "/ws/",
        local_addr=("127.0.0.2", 0),
        additional_headers={"Origin": deployed.url, "Cookie": f"sessionid={cookies['sessionid']}"},
    )
    try:
        await ws.send(json.dumps({"id": time_ordered_id(), "t": "room.join", "d": {"room": "deployed"}}))
        join = json.loads(await ws.recv())
        assert join["t"] == "ack" and join["ok"], join
        body = json.dumps({"t": "room.post", "d": {"room": "deployed", "body": "over http"}})
        status, _, answer = request(
            deployed,
            "POST",
            "/api/commands",
            body=body,
            headers={
                "Content-Type": "application/json",
                "Idempotency-Key": time_ordered_id(),
                "Origin": deployed.url,
                "Cookie": f"sessionid={cookies['sessionid']}; csrftoken={cookies['csrftoken']}",
                "X-CSRFToken": cookies["csrftoken"],
            },
        )
        assert status == 200 and json.loads(answer)["ok"], answer
        # The HTTP command's message reaches the socket, through nginx both ways.
        while (frame := json.loads(await ws.recv()))["t"] != "msg":
            pass
        assert frame["d"]["body"] == "over http"
    finally:
        await ws.close()


def signin_keys(server_env: dict) -> list[str]:
    with redis.Redis.from_url(server_env["REDIS_URL"]) as client:
        return [key.decode() for key in client.scan_iter("*signin*")]


def test_the_app_keys_its_limits_on_the_address_nginx_saw(deployed, server_env):
    # SIGNIN_RATE 2 per address: the third sign-in from 127.0.0.2 is refused...
    assert [sign_in(deployed, f"g{n}")[0] for n in range(3)] == [302, 302, 429]
    # ...whatever the client writes into X-Forwarded-For itself (nginx appends the address it saw)...
    assert sign_in(deployed, "spoof", forwarded_for="203.0.113.9")[0] == 429
    # ...while another address is let in: the limit is not nginx's, shared by everyone.
    assert sign_in(deployed, "other", source="127.0.0.3")[0] == 302
    keys = signin_keys(server_env)
    assert any("127.0.0.2" in key for key in keys) and any("127.0.0.3" in key for key in keys), keys
    assert not any("203.0.113.9" in key or key.endswith(":127.0.0.1") for key in keys), keys


def test_the_systemd_units_are_valid(tmp_path):
    """Each unit as systemd reads it (`systemd-analyze verify`), its paths pointed at this machine's."""
    units = ROOT / "deploy" / "systemd"
    for unit in [*units.glob("*.service"), *units.glob("*.timer")]:
        text = unit.read_text()
        for path in ("/srv/messaging/venv/bin/gunicorn", "/srv/messaging/venv/bin/python"):
            text = text.replace(path, "/bin/true")
        text = re.sub(r"/etc/messaging/[\w%-]+\.env", "/dev/null", text).replace("/srv/messaging/app", str(tmp_path))
        text = text.replace("User=messaging", "User=root").replace("Group=messaging", "Group=root")
        (tmp_path / unit.name).write_text(text)
    names = sorted(p.name for p in tmp_path.glob("messaging*"))
    assert "messaging-server.service" in names and "messaging-relay.service" in names
    checked = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *(str(tmp_path / n) for n in names)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert checked.returncode == 0 and not checked.stderr.strip(), checked.stderr


def test_the_prune_unit_runs_every_retention_command():
    commands = {p.stem for p in (ROOT / "messaging" / "management" / "commands").glob("prune_*.py")}
    unit = (ROOT / "deploy" / "systemd" / "messaging-prune.service").read_text()
    assert commands == set(re.findall(r"manage\.py (prune_\w+)", unit))


async def test_an_event_stream_through_nginx_gets_each_event_as_it_is_written(deployed):
    from .test_event_stream import Stream

    status, cookies = sign_in(deployed, "cy")
    assert status == 302
    stream = await Stream.open(
        deployed.url,
        "/api/stream?rooms=deployed",
        None,
        Origin=deployed.url,
        Cookie=f"sessionid={cookies['sessionid']}",
    )
    try:
        assert stream.status == 200 and stream.headers["content-type"] == "text/event-stream"
        assert (await stream.event())["event"] == "ready"
        body = json.dumps({"t": "room.post", "d": {"room": "deployed", "body": "to the stream"}})
        status, _, answer = request(
            deployed,
            "POST",
            "/api/commands",
            body=body,
            headers={
                "Content-Type": "application/json",
                "Idempotency-Key": time_ordered_id(),
                "Origin": deployed.url,
                "Cookie": f"sessionid={cookies['sessionid']}; csrftoken={cookies['csrftoken']}",
                "X-CSRFToken": cookies["csrftoken"],
            },
        )
        assert status == 200 and json.loads(answer)["ok"], answer
        # Unbuffered: the one event arrives while the response goes on.
        [msg] = await stream.frames("msg", 1)
        assert msg["d"]["body"] == "to the stream"
    finally:
        stream.close()
