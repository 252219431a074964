"""Fresh virtual environments that get packages as a user's `pip install` does, from wheels only.

A `Wheelhouse` is a folder of wheels that outlives the test run (pytest's
cache), so a dependency downloaded from PyPI once is there for every later
run. An environment installs from it with `--no-index`: pip resolves what a
wheel declares against the wheels there and nothing else, and what is
missing is downloaded first, at the version this test environment has (the
lock's) unless a test pins another.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

__all__ = ["Wheelhouse", "fresh_venv", "installed", "run"]


def run(*command: str | Path, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> str:
    proc = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{command} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def fresh_venv(root: Path) -> Path:
    """A new virtual environment with nothing but what `venv` puts there; its python."""
    run(sys.executable, "-m", "venv", root)
    return root / "bin" / "python"


def installed(python: Path) -> set[str]:
    """The distributions an environment has, as `pip list` names them (normalized)."""
    listed = json.loads(run(python, "-m", "pip", "list", "--format=json", "--disable-pip-version-check"))
    return {entry["name"].lower().replace("_", "-") for entry in listed}


class Wheelhouse:
    """A folder of wheels that fresh environments install from, filled from PyPI on demand."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def install(self, python: Path, *requirements: str | Path, pins: Mapping[str, str] | None = None) -> None:
        """`pip install requirements` into `python`'s environment from this folder alone; what the
        folder lacks is downloaded into it first, pinned as this environment has it or as `pins` says."""
        versions = {
            d.metadata["Name"].lower(): d.version for d in importlib.metadata.distributions() if d.metadata["Name"]
        }
        versions.update({name.lower(): version for name, version in (pins or {}).items()})
        with tempfile.TemporaryDirectory() as scratch:
            constraints = Path(scratch, "constraints.txt")
            constraints.write_text("".join(f"{name}=={version}\n" for name, version in sorted(versions.items())))
            pinned = ("-c", constraints, *requirements)
            offline = (
                python,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-index",
                "--find-links",
                self.folder,
                *pinned,
            )
            if subprocess.run([str(c) for c in offline], capture_output=True, timeout=600).returncode != 0:
                run(
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--only-binary=:all:",
                    "--dest",
                    self.folder,
                    *pinned,
                )
                # pip saves the wheels it was given too: the folder keeps only what came from the index.
                for given in requirements:
                    if isinstance(given, Path):
                        (self.folder / given.name).unlink(missing_ok=True)
                run(*offline)
