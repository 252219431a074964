"""What `room.search` finds (PROTOCOL.md 1.2: every word of `q`, case-insensitive), one table for
PostgreSQL (tests/integration/test_search.py) and SQLite (tests/package/test_wheel.py): the two
databases must find the same messages for the same words."""

from __future__ import annotations

# The bodies posted, in order (seq 1, 2, ...).
CORPUS = (
    "Hello World from the lobby",
    "hello again, world",
    "Café au lait, naïve reader",
    "cafe without its accent",
    "foo-bar and ana@example.com at 3.14",
    "snake_case and CamelCase",
    "ΑΒΓ Привет 東京 emoji😀after",
    "helloworld stuck together",
)
# q -> the seqs it finds, newest first.
CASES = {
    "hello": [2, 1],
    "HELLO world": [2, 1],
    "world hello": [2, 1],
    "hello lobby": [1],
    "hel": [],
    "hello, world!": [2, 1],
    "café": [3],
    "CAFÉ": [3],
    "cafe": [4],
    "NAÏVE": [3],
    "foo": [5],
    "foo-bar": [5],
    "bar foo": [5],
    "ana": [5],
    "example.com": [5],
    "14": [5],
    "3.14": [5],
    "snake": [6],
    "case": [6],
    "camelcase": [6],
    "αβγ": [7],
    "привет": [7],
    "東京": [7],
    "after": [7],
    "emoji": [7],
    "helloworld": [8],
    "absent": [],
    "hello absent": [],
}
