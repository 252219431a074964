"""The lock files say what `make` installs: each pins, with hashes, every pin
of its human-edited input at the same version, so an edit of a
requirements*.txt without `make lock` fails here rather than going unnoticed."""

from __future__ import annotations

import re

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.servers import ROOT

LOCKED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)((?:\s*\\\n\s+--hash=sha256:[0-9a-f]{64})*)", re.M)


def pins_of_input(name: str) -> dict[str, str]:
    """The exact pins of a requirements file and of the files it includes with -r."""
    pins: dict[str, str] = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            pins |= pins_of_input(line[3:].strip())
        elif line:
            requirement = Requirement(line)
            [spec] = requirement.specifier
            assert spec.operator == "==", f"{name}: {line} is not pinned"
            pins[canonicalize_name(requirement.name)] = spec.version
    return pins


def locked(name: str) -> dict[str, tuple[str, int]]:
    text = (ROOT / name).read_text()
    return {canonicalize_name(n): (v, hashes.count("--hash=")) for n, v, hashes in LOCKED.findall(text)}


@pytest.mark.parametrize("name", ["requirements", "requirements-dev", "requirements-bench", "requirements-docs"])
def test_each_lock_pins_its_inputs_with_hashes(name):
    lock = locked(f"{name}.lock")
    assert lock, f"{name}.lock pins nothing"
    assert {pkg: n for pkg, (_, n) in lock.items() if n == 0} == {}, "pins without a hash"
    wanted = pins_of_input(f"{name}.txt")
    assert {
        pkg: (version, lock.get(pkg, ("missing",))[0])
        for pkg, version in wanted.items()
        if lock.get(pkg, ("missing",))[0] != version
    } == {}


def test_the_locks_agree_on_every_package_they_share():
    run, dev, bench = (locked(f"{n}.lock") for n in ("requirements", "requirements-dev", "requirements-bench"))
    for smaller, larger in ((run, dev), (dev, bench)):
        assert {
            p: (v, larger.get(p, ("missing",))[0])
            for p, (v, _) in smaller.items()
            if larger.get(p, ("missing",))[0] != v
        } == {}
