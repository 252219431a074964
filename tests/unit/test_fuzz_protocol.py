"""Property-based fuzzing of the frame parser and the field validators.

Whatever arrives, parsing either yields a command with a valid id or raises
`BadFrame`; validation either yields data or raises `Invalid`. Nothing else
may escape: anything else would reach the consumer as an unexpected error.
"""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from messaging.core import handlers
from messaging.core.exceptions import BadFrame, Invalid, UnknownType
from messaging.core.protocol import COMMAND_ID, Command, check_data, loads, parse_command

from ..support.hostile import command_data, frames, json_values, valid_ids


@given(frames)
@settings(max_examples=400)
def test_parsing_yields_a_command_with_a_valid_id_or_bad_frame(text):
    try:
        command = parse_command(text)
    except BadFrame as exc:
        assert exc.message
        return
    assert isinstance(command, Command) and COMMAND_ID.fullmatch(command.id)


@given(valid_ids, st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_any_object_with_a_valid_id_is_a_command_whatever_else_it_holds(id, rest):
    frame = {**rest, "id": id}
    command = parse_command(json.dumps(frame))
    # As JSON reads it: a number beyond 64 bits is a double (`loads`), so a `t`
    # of -2**63 - 1 arrives as -9.223372036854776e+18 (and is refused as not a string).
    read = json.loads(json.dumps(frame), parse_int=lambda n: int(n) if -(2**63) <= int(n) < 2**64 else float(n))
    assert command == Command(id=id, t=read.get("t"), d=read.get("d"))


@given(st.text().filter(lambda text: not text.strip()))
def test_blank_frames_are_bad(text):
    with pytest.raises(BadFrame):
        parse_command(text)


@pytest.mark.parametrize("type", ["room.join", "room.post", "receipt"])
@given(data=command_data)
@settings(max_examples=300)
def test_validation_yields_data_or_invalid(type, data):
    handler = handlers.lookup(type)
    try:
        handlers.validate(handler, data)
    except Invalid as exc:
        assert exc.message and exc.code == "invalid" and exc.retry is False


@given(json_values)
def test_lookup_of_any_type_is_a_handler_or_a_refusal(t):
    try:
        handlers.lookup(t)
    except Invalid:
        assert not isinstance(t, str)
    except UnknownType as exc:
        assert isinstance(t, str) and len(exc.message) < 100


@given(valid_ids, st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_data_within_the_limits_has_a_fingerprint_that_ignores_key_order(id, d):
    try:
        check_data(d)
    except Invalid as exc:
        # Refused before any fingerprint is made: only data within the limits gets one.
        assert exc.code == "invalid"
        return
    reordered = dict(reversed(list(d.items())))
    assert Command(id, "room.post", d).fingerprint == Command(id, "room.post", reordered).fingerprint


@given(json_values)
def test_the_fallback_parser_reads_what_orjson_reads(value):
    # A lone surrogate beside `value` sends the text to the fallback parser.
    text = json.dumps({"v": value, "s": "\ud800"})
    try:
        expected = orjson.loads(json.dumps(value))
    except orjson.JSONDecodeError:
        # A lone surrogate inside `value` too: nothing for orjson to compare with.
        assert "\\ud" in json.dumps(value).lower()
        return
    assert loads(text) == {"v": expected, "s": "\ud800"}
