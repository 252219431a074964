"""The deployment entry point, as `daphne project.asgi:application` imports it."""

from __future__ import annotations

import subprocess
import sys

from tests.support.servers import ROOT


def test_the_entry_point_freezes_what_it_imported_out_of_the_collectors_full_passes():
    # A process of its own: freezing is process-wide, and the point is what
    # the entry point leaves behind for the server, not this test runner.
    probe = "import gc, project.asgi; print(gc.get_freeze_count())"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    # Django, channels and the app: far more than the interpreter's own.
    assert int(out.stdout) > 50_000, out
