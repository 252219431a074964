"""This deployment's name and its peers, read once from the settings (docs/FEDERATION.md, "Configuration").

`NODE` names this deployment; unset, federation is off and nothing else is
read. `PEERS` and `PEER_SECRETS` name each peer's base URL and the secret
the pair shares, as comma-separated `name=value` entries (what the demo
reads from `MESSAGING_PEERS` and `MESSAGING_PEER_SECRETS`) or as dicts.
`problems` says what is wrong with them, each under the id of its system
check (`checks.py`); `federation()` refuses to work with any of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from ..conf import MessagingSettings, get_settings

NODE_NAME = re.compile(r"[a-z][a-z0-9]{0,15}")
# Shorter secrets are guessed too easily: a pair's secret signs everything one side asks of the other.
MIN_SECRET_CHARS = 16


class Problem(NamedTuple):
    """One thing wrong with the configuration, under its check's id (`messaging.E004`...)."""

    id: str
    message: str


@dataclass(frozen=True)
class Peer:
    name: str
    # Without a trailing slash: paths are appended (`/federation/changes`).
    base_url: str
    secret: bytes

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"


@dataclass(frozen=True)
class Federation:
    """This deployment (`node`) and its peers by name."""

    node: str
    peers: Mapping[str, Peer]


def _entries(value: Any, setting: str) -> tuple[dict[str, str], list[Problem]]:
    """`name=value` entries of a comma-separated string, or a dict's items, and what is malformed in them."""
    if value is None or value == "":
        return {}, []
    if isinstance(value, Mapping):
        items = [(str(k), str(v)) for k, v in value.items()]
    elif isinstance(value, str):
        items = []
        for entry in value.split(","):
            entry = entry.strip()
            if not entry:
                continue
            name, sep, text = entry.partition("=")
            if not sep:
                return {}, [Problem("messaging.E007", f"{setting}: {entry!r} is not name=value")]
            items.append((name.strip(), text.strip()))
    else:
        return {}, [Problem("messaging.E007", f"{setting} must be a string of name=value entries or a dict")]
    found: dict[str, str] = {}
    problems: list[Problem] = []
    for name, text in items:
        if not NODE_NAME.fullmatch(name):
            problems.append(
                Problem("messaging.E007", f"{setting}: {name!r} is not a node name (^[a-z][a-z0-9]{{0,15}}$)")
            )
        elif name in found:
            problems.append(Problem("messaging.E007", f"{setting}: {name!r} is named twice"))
        else:
            found[name] = text
    return found, problems


def url_problem(url: str) -> str | None:
    """Why `url` is no peer's base URL (http or https, a host, no user, query or fragment), or None."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return str(exc)
    if parts.scheme not in ("http", "https"):
        return "its scheme must be http or https"
    if not parts.hostname:
        return "it names no host"
    if parts.username is not None or parts.password is not None:
        return "it must not hold a user or password"
    if parts.query or parts.fragment:
        return "it must not have a query or fragment"
    del port
    return None


def read(conf: MessagingSettings) -> tuple[Federation | None, list[Problem]]:
    """The federation these settings describe (None: off), and every problem with them."""
    peers, problems = _entries(conf.PEERS, "PEERS")
    secrets, secret_problems = _entries(conf.PEER_SECRETS, "PEER_SECRETS")
    problems += secret_problems
    node = conf.NODE
    if node is None or node == "":
        if peers or secrets:
            problems.append(Problem("messaging.W004", "PEERS or PEER_SECRETS are set without NODE: federation is off"))
        return None, problems
    if not isinstance(node, str) or not NODE_NAME.fullmatch(node):
        problems.append(Problem("messaging.E004", f"NODE {node!r} does not match ^[a-z][a-z0-9]{{0,15}}$"))
        return None, problems
    found: dict[str, Peer] = {}
    for name, url in peers.items():
        wrong = url_problem(url)
        secret = secrets.get(name, "")
        if name == node:
            problems.append(Problem("messaging.E007", f"PEERS names this deployment ({node!r}) as its own peer"))
        elif wrong is not None:
            problems.append(Problem("messaging.E006", f"PEERS: the URL of {name!r}, {url!r}, is malformed: {wrong}"))
        elif not secret:
            problems.append(Problem("messaging.E005", f"PEER_SECRETS has no secret for the peer {name!r}"))
        elif len(secret) < MIN_SECRET_CHARS:
            problems.append(
                Problem("messaging.E005", f"PEER_SECRETS: the secret of {name!r} is shorter than {MIN_SECRET_CHARS}")
            )
        else:
            found[name] = Peer(name, url.rstrip("/"), secret.encode())
    for name in secrets.keys() - peers.keys():
        problems.append(Problem("messaging.W004", f"PEER_SECRETS has a secret for {name!r}, which PEERS does not name"))
    return Federation(node, found), problems


_read: tuple[MessagingSettings, Federation | None] | None = None


def federation() -> Federation | None:
    """This deployment's federation, None when off; `ImproperlyConfigured` (what the
    checks say) when its configuration has an error. Read once per settings."""
    global _read
    conf = get_settings()
    if _read is None or _read[0] is not conf:
        found, problems = read(conf)
        errors = [p for p in problems if p.id.startswith("messaging.E")]
        if errors:
            raise ImproperlyConfigured("; ".join(f"{p.message} ({p.id})" for p in errors))
        _read = (conf, found)
    return _read[1]


def own_node() -> str | None:
    """This deployment's name, or None with federation off (what frames' `node` need, cheaply)."""
    node = get_settings().NODE
    return node or None
