"""The docs are for the people who adopt the app: no work diary, a performance
page of readable length, a changelog in Keep a Changelog's shape, a licence
named where packaging tools look, the contract's 1.2 part whole, and an API
reference whose names are the public ones. `make docs` (mkdocs --strict)
checks the site's links and anchors; this checks what it cannot."""

from __future__ import annotations

import importlib
import json
import re
import tomllib

import pytest

import messaging
from tests.support.servers import ROOT

DOCS = sorted((ROOT / "docs").glob("*.md"))
READ_BY_USERS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *DOCS]

# Lines that speak of the project's own development rather than of the product.
DIARY = re.compile(
    r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth) session\b"
    r"|\bissue [0-9]+\b",
    re.IGNORECASE,
)
PERFORMANCE_LINES = 600

RELEASE = re.compile(r"^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$")
# Keep a Changelog 1.1.0's kinds of change.
KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}

# The headings of the contract's version 1.2, in its order (docs/PROTOCOL.md
# carries the contract word for word before "What this implementation chose").
PROTOCOL_1_2 = [
    "# Version 1.2: additions",
    "## Invitations are requests",
    "## Who a request comes from",
    "## Credentials end everywhere",
    "## Deleted means gone",
    "## Pages that fit in a frame",
    "## Mention e-mails are bounded",
    "## Outbound requests",
    "## Server-sent events: chat without WebSockets",
    "## Threads, reactions, files, search",
    "## Two deployments, one conversation",
    "## Page hooks (1.2)",
    "## What this implementation chose where the protocol is silent",
]


@pytest.mark.parametrize("path", READ_BY_USERS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_line_speaks_of_sessions_of_work_or_numbered_issues(path):
    diary = [f"{n}: {line}" for n, line in enumerate(path.read_text().splitlines(), 1) if DIARY.search(line)]
    assert diary == []


def test_the_performance_page_is_readable_in_one_sitting():
    assert len((ROOT / "docs" / "PERFORMANCE.md").read_text().splitlines()) <= PERFORMANCE_LINES


def changelog_sections() -> list[tuple[str, list[str]]]:
    """(level-2 heading, the level-3 headings under it), in order."""
    sections: list[tuple[str, list[str]]] = []
    for line in (ROOT / "CHANGELOG.md").read_text().splitlines():
        if line.startswith("## "):
            sections.append((line, []))
        elif line.startswith("### "):
            assert sections, f"{line!r} comes before any version"
            sections[-1][1].append(line[4:])
    return sections


def test_changelog_is_in_keep_a_changelog_form():
    [(unreleased, _), *releases] = changelog_sections()
    assert unreleased == "## [Unreleased]"
    assert releases, "no release"
    versions, dates = [], []
    for heading, kinds in changelog_sections():
        assert set(kinds) <= KINDS, f"{heading}: {set(kinds) - KINDS} are not Keep a Changelog's kinds"
        assert len(kinds) == len(set(kinds)), f"{heading}: a kind twice"
        if heading == unreleased:
            continue
        match = RELEASE.match(heading)
        assert match, f"{heading!r} is not '## [x.y.z] - YYYY-MM-DD'"
        assert kinds, f"{heading}: no change listed"
        versions.append(tuple(int(part) for part in match.groups()[:3]))
        dates.append(match.group(4))
    assert versions == sorted(versions, reverse=True), "releases are not newest first"
    assert dates == sorted(dates, reverse=True)


def test_the_newest_release_is_the_version_the_package_and_npm_say():
    newest = RELEASE.match(changelog_sections()[1][0])
    version = ".".join(newest.groups()[:3])
    assert messaging.__version__ == version
    npm = json.loads((ROOT / "clients/js/package.json").read_text())
    assert npm["version"] == version


def test_the_licence_is_bsd_3_clause_and_named_where_tools_look():
    licence = (ROOT / "LICENSE").read_text()
    assert licence.startswith("BSD 3-Clause License\n\nCopyright (c) 2026, the messaging authors\n")
    assert "Neither the name of the copyright holder nor the names of its" in licence
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "BSD-3-Clause"
    assert project["license-files"] == ["LICENSE"]
    npm = json.loads((ROOT / "clients/js/package.json").read_text())
    assert npm["license"] == "BSD-3-Clause"


def test_the_protocol_carries_the_contracts_1_2_part_whole():
    headings = [line for line in (ROOT / "docs" / "PROTOCOL.md").read_text().splitlines() if line.startswith("#")]
    assert headings[0] == "# messaging wire protocol, version 1"
    start = headings.index(PROTOCOL_1_2[0])
    assert headings[start : start + len(PROTOCOL_1_2)] == PROTOCOL_1_2


def reference_entries() -> list[tuple[str, str]]:
    """(the object mkdocstrings documents, the name its heading gives) for each entry of docs/API.md."""
    entries: list[tuple[str, str]] = []
    for line in (ROOT / "docs" / "API.md").read_text().splitlines():
        if line.startswith("::: "):
            entries.append((line[4:].strip(), line[4:].strip()))
        elif line.strip().startswith("heading: ") and entries:
            entries[-1] = (entries[-1][0], line.split(":", 1)[1].strip())
    return entries


def resolve(dotted: str) -> object:
    module, _, name = dotted.rpartition(".")
    try:
        return importlib.import_module(dotted)
    except ModuleNotFoundError:
        return getattr(importlib.import_module(module), name)


def test_the_api_reference_documents_the_public_names():
    entries = dict(reference_entries())
    assert set(entries.values()) >= {
        "messaging.submit",
        "messaging.asubmit",
        "messaging.command",
        "messaging.CommandContext",
        "messaging.testing",
        "messaging_client",
    }
    for documented, public in entries.items():
        assert resolve(documented) is resolve(public), f"{public} is not {documented}"
