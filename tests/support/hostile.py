"""Hostile frames for fuzzing, and what the protocol says each one must get."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from messaging.exceptions import BadFrame
from messaging.protocol import parse_command

# Integers as the parser yields them: orjson reads larger ones as floats.
json_ints = st.integers(min_value=-(2**63), max_value=2**64 - 1)
json_scalars = st.none() | st.booleans() | json_ints | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
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
# Text frames as a hostile client could send them: arbitrary text (lone
# surrogates included), arbitrary JSON, and frames shaped like commands.
frames = st.one_of(st.text(), json_values.map(json.dumps), command_like.map(json.dumps))
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
            max_examples=max_examples, deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )(given(sequence=hostile_sequences)(test))

    return decorate


# Frames a socket may get at any time, besides the answers to its own frames.
BROADCASTS = {"msg", "status"}

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
