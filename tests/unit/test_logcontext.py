"""Client text in log records: escaped, bounded, never str()-ed unless it is a string."""

from __future__ import annotations

import json
import logging

import pytest

from messaging.ops.logcontext import (
    LOGGED_CHARS,
    NOT_A_STRING,
    CommandContextFilter,
    JsonFormatter,
    command_scope,
    loggable,
)


@pytest.mark.parametrize(
    "text, shown",
    [
        ("room.post", "room.post"),
        ("é😀 ok", "é😀 ok"),
        ("a\nb", "a\\nb"),
        ("a\r\nb", "a\\r\\nb"),
        ("tab\there", "tab\\there"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("back\\slash", "back\\\\slash"),
        ("\ud800", "\\ud800"),
        ("\u202eevil", "\\u202eevil"),
        ("line\u2028sep", "line\\u2028sep"),
        ("", ""),
    ],
)
def test_client_text_is_escaped(text, shown):
    assert loggable(text) == shown


def test_client_text_is_bounded_escapes_included():
    assert loggable("x" * 500) == "x" * LOGGED_CHARS + "..."
    escaped = loggable("\n" * 500)
    assert escaped == "\\n" * (LOGGED_CHARS // 2) + "..." and "\n" not in escaped


@pytest.mark.parametrize("value", [None, 7, 1.5, ["room.post"], {"t": "x"}, b"bytes"])
def test_anything_but_a_string_is_a_marker(value):
    assert loggable(value) == NOT_A_STRING


def test_a_deep_value_is_never_turned_into_text():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with command_scope("id", deep, 1):
        record = logging.LogRecord("messaging", logging.INFO, __file__, 1, "inside", None, None)
        CommandContextFilter().filter(record)
    assert record.command_type == NOT_A_STRING


def test_the_json_formatter_writes_json_whatever_the_text_holds():
    with command_scope("id", "t\n\ud800", 1):
        record = logging.LogRecord("messaging", logging.INFO, __file__, 1, "body %s", ("a\udc00\nb",), None)
        CommandContextFilter().filter(record)
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["command_type"] == "t\\n\\ud800" and entry["message"] == "body a\\udc00\nb"
