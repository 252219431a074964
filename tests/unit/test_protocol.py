"""Frame parsing and field validation: every bad input of PROTOCOL.md."""

from __future__ import annotations

import pytest

from messaging.core.exceptions import BadFrame, Invalid
from messaging.core.protocol import (
    FALLBACK_MAX_DEPTH,
    INT_MAX,
    INT_MIN,
    MAX_DATA_DEPTH,
    Command,
    check_data,
    format_time,
    loads,
    message_body,
    optional_seq,
    parse_command,
    require_object,
    room_slug,
)


def test_parses_a_command():
    command = parse_command('{"id": "a-1_B", "t": "room.post", "d": {"room": "lobby", "body": "hi"}, "x": 1}')
    assert command == Command(id="a-1_B", t="room.post", d={"room": "lobby", "body": "hi"})


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "not json",
        "{",
        "[]",
        '"a string"',
        "42",
        "null",
        '{"t": "room.post"}',
        '{"id": "", "t": "room.post"}',
        '{"id": null, "t": "room.post"}',
        '{"id": 7, "t": "room.post"}',
        '{"id": "has space", "t": "x"}',
        '{"id": "dots.are.bad", "t": "x"}',
        '{"id": "' + "a" * 65 + '", "t": "x"}',
        '{"id": "ok\\n", "t": "x"}',
        '{"id": "x", "t": "room.post", "d": {"n": NaN}}',
        '{"id": "x", "t": "room.post", "d": {"n": Infinity}}',
        '{"id": "x", "t": "room.post", "d": {"n": -Infinity}}',
        '{"id": "x", "t": "room.post"} trailing',
    ],
)
def test_frames_without_a_valid_id_are_bad(text):
    with pytest.raises(BadFrame):
        parse_command(text)


ESCAPED = "\\ud800"  # the six characters JSON.stringify writes for half an emoji


@pytest.mark.parametrize(
    "text, d",
    [
        ('{"id": "x", "t": "room.post", "d": {"body": "' + ESCAPED + '"}}', {"body": "\ud800"}),
        ('{"id": "x", "d": {"body": "ok \\ud83d\\ude00 \\udfff"}}', {"body": "ok \U0001f600 \udfff"}),
        ('{"id": "x", "d": {"' + ESCAPED + '": [1, -2, 1.5, true, null]}}', {"\ud800": [1, -2, 1.5, True, None]}),
        (
            '{"id": "x", "d": {"n": 18446744073709551616, "m": -9223372036854775809, "s": "\\udc00"}}',
            {"n": 2.0**64, "m": -(2.0**63), "s": "\udc00"},
        ),
        ('{"id": "x", "d": {"n": 18446744073709551615, "s": "\\udc00"}}', {"n": 2**64 - 1, "s": "\udc00"}),
        ('\n {"id": "x", "d": {"s": "' + ESCAPED + '"}} \t', {"s": "\ud800"}),
    ],
)
def test_a_lone_surrogate_escaped_in_json_is_still_a_command(text, d):
    assert parse_command(text) == Command(id="x", t=parse_command(text).t, d=d)


@pytest.mark.parametrize(
    "text",
    [
        # What orjson refuses is refused when a lone surrogate sends the text to the fallback parser.
        '{"id": "x", "d": {"s": "' + ESCAPED + '", "n": NaN}}',
        '{"id": "x", "d": {"s": "' + ESCAPED + '", "n": Infinity}}',
        '{"id": "x", "d": {"s": "' + ESCAPED + '", "n": -Infinity}}',
        '{"id": "x", "d": {"s": "' + ESCAPED + '", "n": 1e400}}',
        '{"id": "x", "d": {"s": "' + ESCAPED + '", "n": ' + "9" * 5000 + "}}",
        '{"id": "x", "d": {"s": "' + ESCAPED + '"}} trailing',
        '{"id": "x", "d": {"s": "' + ESCAPED + '\x01"}}',
        '{"id": "x", "d": {"s": "' + ESCAPED + '", }}',
        '{"id": "x", "d": {"s": "' + ESCAPED + '", "n": 01}}',
        "{'id': 'x', 'd': '" + ESCAPED + "'}",
        '{"id": "' + ESCAPED + '", "t": "room.post"}',
        '{"id": "x", "d": {"s": "\\ud80"}}',
        '[1, "' + ESCAPED + '"]',
    ],
)
def test_the_fallback_parser_is_as_strict_as_orjson(text):
    with pytest.raises(BadFrame):
        parse_command(text)


def test_the_fallback_parser_reads_at_most_its_depth():
    def deep(levels: int) -> str:
        return '{"id": "x", "d": {"s": "' + ESCAPED + '", "k": ' + "[" * (levels - 2) + "]" * (levels - 2) + "}}"

    assert parse_command(deep(FALLBACK_MAX_DEPTH)).id == "x"
    for levels in (FALLBACK_MAX_DEPTH + 1, 1000, 1024, 5000, 30_000):
        with pytest.raises(BadFrame, match=f"nested deeper than {FALLBACK_MAX_DEPTH} levels"):
            parse_command(deep(levels))
    # Brackets inside strings are no nesting; many shallow arrays are none either.
    wide = '{"id": "x", "d": {"s": "' + ESCAPED + "[" * 5000 + '", "k": [' + ", ".join(["[]"] * 5000) + "]}}"
    assert len(loads(wide)["d"]["k"]) == 5000


def test_orjson_still_refuses_what_has_no_lone_surrogate():
    with pytest.raises(BadFrame, match="not JSON"):
        parse_command('{"id": "x", "d": {"s": "\\ud83d\\ude00", "n": NaN}}')
    with pytest.raises(BadFrame, match="not JSON"):
        parse_command('{"id": "x", "d": ' + "[" * 1025 + "]" * 1025 + "}")


@pytest.mark.parametrize(
    "d",
    [{"body": "\ud800"}, {"body": "ok", "junk": ["a", {"b": "x\udfff"}]}, {"\udc00": 1}, {"k": {"\ud800x": 1}}],
)
def test_a_lone_surrogate_anywhere_in_d_is_invalid(d):
    with pytest.raises(Invalid, match="lone surrogate"):
        check_data(d)


def test_paired_surrogates_are_text_like_any_other():
    assert check_data({"body": "\U0001f600", "\U0001f600": ["é"]})


def test_id_of_64_characters_is_accepted():
    assert parse_command('{"id": "' + "Z" * 64 + '"}').id == "Z" * 64


def test_fingerprint_ignores_key_order_but_not_values():
    a = Command("x", "room.post", {"room": "lobby", "body": "hi"})
    b = Command("x", "room.post", {"body": "hi", "room": "lobby"})
    c = Command("x", "room.post", {"body": "hi!", "room": "lobby"})
    d = Command("x", "room.join", {"body": "hi", "room": "lobby"})
    assert a.fingerprint == b.fingerprint
    assert len({a.fingerprint, c.fingerprint, d.fingerprint}) == 3


def nested(levels: int, inner: object = "x") -> dict:
    """An object `levels` deep, counting itself as the first, holding `inner` at the bottom."""
    value: object = inner
    for n in range(levels - 1):
        value = [value] if n % 2 else {"k": value}
    return {"k": value}


def test_data_nested_to_the_limit_is_fine_one_more_is_invalid():
    assert MAX_DATA_DEPTH == 32
    assert check_data(nested(32)) == nested(32)
    with pytest.raises(Invalid, match="nested deeper than 32 levels"):
        check_data(nested(33))
    with pytest.raises(Invalid, match="nested deeper"):
        check_data(nested(32, inner=[]))  # an empty array is a level too: the 33rd


def test_deep_data_is_checked_without_recursion():
    # Far deeper than Python's recursion limit: refused at level 33, not walked.
    with pytest.raises(Invalid, match="nested deeper"):
        check_data(nested(100_000))


@pytest.mark.parametrize("number", [INT_MIN, INT_MAX, 0, -1, 1.5, 2.0, -9.2e18, 9.2e18, True])
def test_numbers_within_int64_are_fine(number):
    assert check_data({"a": [{"b": number}]})


@pytest.mark.parametrize(
    "number",
    # From 2^64 on orjson reads an integer as a float (and -2^63-1 as the float
    # -2^63); 1e300 too is an integer to a JavaScript client (Number.isInteger).
    [
        INT_MAX + 1,
        INT_MIN - 1,
        2**64,
        2**64 - 1,
        10**30,
        2.0**63,
        -(2.0**63),
        1.8446744073709552e19,
        -1e300,
        float("inf"),
    ],
)
def test_numbers_outside_int64_are_invalid_wherever_they_are(number):
    for data in ({"read": number}, {"junk": [[{"x": number}]]}):
        with pytest.raises(Invalid, match="outside -2\\^63..2\\^63-1"):
            check_data(data)


@pytest.mark.parametrize("data", [None, [], "x", 1, True])
def test_data_must_be_an_object(data):
    with pytest.raises(Invalid):
        require_object(data)


@pytest.mark.parametrize("room", ["lobby", "a", "0-9", "a" * 64, "a-"])
def test_good_room_slugs(room):
    assert room_slug({"room": room}) == room


@pytest.mark.parametrize("room", [None, "", "-a", "Lobby", "a_b", "a b", "a" * 65, 5, "lobby\n", "é"])
def test_bad_room_slugs(room):
    with pytest.raises(Invalid):
        room_slug({"room": room})


@pytest.mark.parametrize("value", [-1, 1.5, 2.0, "3", True, False, [1]])
def test_bad_seqs(value):
    with pytest.raises(Invalid):
        optional_seq({"since": value}, "since")


def test_seq_absent_or_null_is_none_and_zero_is_fine():
    assert optional_seq({}, "since") is None
    assert optional_seq({"since": None}, "since") is None
    assert optional_seq({"since": 0}, "since") == 0


def test_body_is_trimmed():
    assert message_body({"body": "  hello \n"}, 4000) == "hello"
    assert message_body({"body": "é" * 4000}, 4000) == "é" * 4000


@pytest.mark.parametrize(
    "body",
    [None, 5, "", "   \n\t", "x" * 4001, "a\x00b", "a\ud800b", "\udfff", ["x"]],
)
def test_bad_bodies(body):
    with pytest.raises(Invalid):
        message_body({"body": body}, 4000)


def test_time_format_is_utc_with_microseconds():
    from datetime import datetime, timedelta, timezone

    moment = datetime(2026, 11, 29, 19, 0, 0, 5, tzinfo=timezone(timedelta(hours=1)))
    assert format_time(moment) == "2026-11-29T18:00:00.000005Z"
