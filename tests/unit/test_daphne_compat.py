"""Autobahn's debug-line arguments, formatted only when a line is written."""
from __future__ import annotations

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
    assert "{x}".format(x=argument) == "red:7"
    assert str(argument) == "red:7"
    assert calls == [7, 7]


def test_autobahn_frames_no_longer_colour_their_debug_arguments_up_front():
    defer_autobahn_log_formatting()
    defer_autobahn_log_formatting()  # twice is harmless: no deferral of a deferral
    for module in (protocol, twisted_websocket):
        argument = module.hltype(test_autobahn_frames_no_longer_colour_their_debug_arguments_up_front)
        assert isinstance(argument, Deferred)
        assert argument.render is autobahn.util.hltype
        assert str(argument) == autobahn.util.hltype(test_autobahn_frames_no_longer_colour_their_debug_arguments_up_front)
        assert f"{module.hlval(42)}" == autobahn.util.hlval(42)
