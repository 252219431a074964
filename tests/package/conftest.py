"""What the packaging tests share: a folder of wheels that outlives the run (tests/support/venvs.py)."""
from __future__ import annotations

import pytest

from tests.support.venvs import Wheelhouse


@pytest.fixture(scope="session")
def wheelhouse(request) -> Wheelhouse:
    """Wheels downloaded once (into .pytest_cache; `make clean` empties it) for fresh environments to install from."""
    return Wheelhouse(request.config.cache.mkdir("wheelhouse"))
