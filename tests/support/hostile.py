"""Hostile frames for fuzzing, and what the protocol says each one must get."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from messaging.core.exceptions import BadFrame
from messaging.core.protocol import parse_command

# Integers around every bound the server has: int64 (PROTOCOL 1.1's limit),
# uint64 (what orjson reads as an integer; beyond it, a float) and more.
INT_EDGES = [2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, -(2**64), 10**30]
json_ints = st.integers(min_value=-(2**70), max_value=2**70) | st.sampled_from(INT_EDGES)
# Text with a lone surrogate in it: json.dumps escapes it (`"\ud800"`), as
# JSON.stringify does for half an emoji. Hypothesis's text leaves them out.
lone_surrogates = st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"])
texts = st.text() | st.builds(lambda a, s, b: a + s + b, st.text(max_size=4), lone_surrogates, st.text(max_size=4))
json_scalars = st.none() | st.booleans() | json_ints | st.floats(allow_nan=False, allow_infinity=False) | texts


def nested_list(levels: int) -> object:
    """A value `levels` arrays deep."""
    value: object = "bottom"
    for _ in range(levels):
        value = [value]
    return value


# Nesting around the limits: `d`'s 32 levels and the 254 orjson writes
# (json.dumps itself stops short of Python's recursion limit, so no deeper).
deep_values = st.one_of(st.integers(28, 36), st.integers(250, 300)).map(nested_list)
json_values = st.recursive(
    json_scalars | deep_values,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts.filter(lambda k: len(k) <= 8), inner, max_size=4),
    max_leaves=12,
)
valid_ids = st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)
command_data = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "room": st.one_of(st.sampled_from(["lobby", "a", "-x", "Lobby", "a" * 65]), json_values),
            "body": json_values,
            "since": json_values,
            "delivered": json_values,
            "read": json_values,
        },
    ),
)
command_like = st.fixed_dictionaries(
    {"id": st.one_of(valid_ids, json_values)},
    optional={"t": st.one_of(st.sampled_from(["room.join", "room.post", "receipt"]), json_values), "d": command_data},
)
# Command frames nested deeper than json.dumps writes, written as text: up to
# and past orjson's 1,024 levels and the fallback parser's 512 (which reads
# text with an escaped lone surrogate), in `d` and in `t`.
deep_frames = st.builds(
    lambda levels, where, surrogate: (
        '{"id": "deep", "t": %s, "d": {"s": "%s", "k": %s}}'
        % (
            "[" * levels + "]" * levels if where == "t" else '"room.post"',
            "\\ud800" if surrogate else "ok",
            "[" * levels + "]" * levels if where == "d" else "1",
        )
    ),
    st.one_of(st.integers(500, 520), st.integers(1015, 1030)),
    st.sampled_from(["t", "d"]),
    st.booleans(),
)
# Text frames as a hostile client could send them: arbitrary text (lone
# surrogates included), arbitrary JSON, and frames shaped like commands.
frames = st.one_of(st.text(), json_values.map(json.dumps), command_like.map(json.dumps), deep_frames)
# What a socket may carry: mostly text, sometimes binary.
hostile_sequences = st.lists(st.one_of(frames, frames, st.binary(max_size=64)), min_size=1, max_size=12)

# Sequences that surely reach each ending, whatever hypothesis draws: the
# tenth bad frame in a row (1008), a binary frame (1003), commands answered.
EVERY_ENDING = [
    ['{"id": "ok", "t": "room.post", "d": {"room": "lobby", "body": "hi"}}'] + ["{"] * 10,
    ['{"id": "x", "t": "room.nope"}', b"\x00"],
    ['{"id": "a", "t": "room.join", "d": {"room": "lobby", "since": 0}}', '{"id": "a", "t": "receipt", "d": {}}'],
]


def over_hostile_sequences(max_examples: int):
    """Run a test over `sequence`s of hostile frames, the EVERY_ENDING ones included.

    Examples share the test's fixtures (one database, one server): each builds
    its own socket, so nothing carries over but the rows it wrote.
    """

    def decorate(test):
        for sequence in EVERY_ENDING:
            test = example(sequence=sequence)(test)
        return settings(
            max_examples=max_examples,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )(given(sequence=hostile_sequences)(test))

    return decorate


# Frames a socket may get at any time, besides the answers to its own frames.
BROADCASTS = {"msg", "status", "typing", "presence"}

# The refusals a fuzzed command may get; anything else (unavailable, in_progress) means trouble.
REFUSALS = {"invalid", "unknown_type", "forbidden", "id_reused"}


class Oracle:
    """What the server must answer to each frame of a sequence on one socket."""

    def __init__(self, bad_frame_limit: int) -> None:
        self.limit = bad_frame_limit
        self.bad_in_a_row = 0

    def expect(self, frame: str | bytes) -> tuple[str, object]:
        """("close", code), ("bad_frame", then_close_code or None) or ("ack", id)."""
        if isinstance(frame, bytes):
            return "close", 1003
        try:
            command = parse_command(frame)
        except BadFrame:
            self.bad_in_a_row += 1
            return "bad_frame", 1008 if self.bad_in_a_row >= self.limit else None
        self.bad_in_a_row = 0
        return "ack", command.id
