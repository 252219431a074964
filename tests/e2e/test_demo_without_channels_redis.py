"""The demo project without channels-redis, which is the app's `redis-layer` extra and no
requirement of it: the settings fall back to the in-memory channel layer, and two processes on
one Redis still carry a room's posts between them (the app's hub does, not a channel layer)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from asgiref.sync import sync_to_async

from messaging.testing import SocketClient
from messaging_client import sign_in
from tests.support.servers import ROOT

pytestmark = [pytest.mark.e2e]

# Loaded by every Python process started with this folder on PYTHONPATH, before anything else.
HIDE = """import sys
# As if channels-redis were not installed: importing it fails and find_spec finds nothing.
sys.modules["channels_redis"] = None
"""


@pytest.fixture
def without_channels_redis(tmp_path) -> dict[str, str]:
    folder = tmp_path / "without-channels-redis"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(HIDE)
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p)}


def channel_layer(server_env: dict[str, str], **env: str) -> str:
    probe = "import django; from django.conf import settings; django.setup(); print(settings.CHANNEL_LAYERS['default']['BACKEND'])"
    environment = {**os.environ, **server_env, "DJANGO_SETTINGS_MODULE": "project.settings", **env}
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=environment, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


async def test_the_demo_falls_back_to_the_in_memory_layer_and_two_processes_still_share_a_room(
    server_env, start_daphne, without_channels_redis
):
    assert channel_layer(server_env) == "channels_redis.core.RedisChannelLayer"
    assert channel_layer(server_env, **without_channels_redis) == "channels.layers.InMemoryChannelLayer"

    a, b = start_daphne(**without_channels_redis), start_daphne(**without_channels_redis)
    ana = await SocketClient(a.url, await sync_to_async(sign_in)(a.url, "ana")).connect()
    bob = await SocketClient(b.url, await sync_to_async(sign_in)(b.url, "bob")).connect()
    try:
        for ws in (ana, bob):
            assert (await ws.call("room.join", {"room": "lobby"}))["ok"]
        ack = await ana.call("room.post", {"room": "lobby", "body": "no channel layer needed"})
        assert ack["ok"] and ack["d"]["seq"] == 1
        assert (await bob.messages_until("lobby", 1))[1]["d"]["body"] == "no channel layer needed"
    finally:
        await ana.close()
        await bob.close()
    for server in (a, b):
        assert "channels_redis" not in server.log() and "ERROR" not in server.log(), server.log()
