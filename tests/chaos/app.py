"""The ASGI application of the harness's servers: the demo project's, plus `hooks`.

`daphne tests.chaos.app:application`, started by `tests.chaos.stack`.
"""

from __future__ import annotations

from project.asgi import application
from tests.chaos import hooks

hooks.install()

__all__ = ["application"]
