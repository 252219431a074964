"""SQL statements kept in `sql/` folders beside the modules that run them, loaded by name.

A statement in a file of its own reads as SQL (and an editor highlights it
as such); the module that runs it says why it is written that way.
"""

from __future__ import annotations

import functools
from importlib import resources


@functools.cache
def statement(package: str, name: str) -> str:
    """The text of `<package>/sql/<name>.sql` (read once per process)."""
    return resources.files(package).joinpath("sql", f"{name}.sql").read_text(encoding="utf-8")
