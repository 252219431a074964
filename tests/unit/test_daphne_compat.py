"""Autobahn's debug-line arguments, formatted only when a line is written; nothing of daphne loaded under another server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import autobahn.util
from autobahn.twisted import websocket as twisted_websocket
from autobahn.websocket import protocol

from messaging.transport.daphne_compat import Deferred, defer_autobahn_log_formatting


def test_a_deferred_argument_renders_only_when_formatted():
    calls = []

    def render(value, color="white"):
        calls.append(value)
        return f"{color}:{value}"

    argument = Deferred(render, (7,), {"color": "red"})
    assert calls == []
    assert f"{argument}" == "red:7"
    assert str(argument) == "red:7"
    assert calls == [7, 7]


def test_autobahn_frames_no_longer_colour_their_debug_arguments_up_front():
    defer_autobahn_log_formatting()
    defer_autobahn_log_formatting()  # twice is harmless: no deferral of a deferral
    for module in (protocol, twisted_websocket):
        argument = module.hltype(test_autobahn_frames_no_longer_colour_their_debug_arguments_up_front)
        assert isinstance(argument, Deferred)
        assert argument.render is autobahn.util.hltype
        assert str(argument) == autobahn.util.hltype(
            test_autobahn_frames_no_longer_colour_their_debug_arguments_up_front
        )
        assert f"{module.hlval(42)}" == autobahn.util.hlval(42)


LOADED = """
import asyncio, sys
import django
django.setup()
import project.asgi
from messaging.transport import daphne_compat
from messaging.transport.servers import send_buffer

async def send(message):
    pass

daphne_compat.allow_protocol_close_codes()
daphne_compat.defer_autobahn_log_formatting()
daphne_compat.adapt_to_daphne()
send_buffer(send, 1 << 20, lambda frames, waited: None)
print(sorted(name for name in ("daphne", "twisted", "autobahn", "OpenSSL") if name in sys.modules))
"""


def test_under_another_server_nothing_loads_daphne_or_twisted():
    """A uvicorn process need not carry Twisted, autobahn and OpenSSL (25 MB before its first socket)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DEBUG": "0",
        "SECRET_KEY": "x" * 50,
        "ALLOWED_HOSTS": "127.0.0.1",
    }
    found = subprocess.run(
        [sys.executable, "-c", LOADED],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "[]"
