"""The system checks of federation's configuration (docs/FEDERATION.md, "Configuration").

| id | what |
| --- | --- |
| `messaging.E004` | `NODE` (`MESSAGING_NODE`) does not match `^[a-z][a-z0-9]{0,15}$` |
| `messaging.E005` | a peer without a secret in `PEER_SECRETS`, or one shorter than 16 characters |
| `messaging.E006` | a peer's base URL that is not `http(s)://host...` without user, query or fragment |
| `messaging.E007` | a `PEERS` or `PEER_SECRETS` entry that is not `name=value` with a node name, a peer named twice or like this deployment |
| `messaging.W004` | peers or secrets given without `NODE` (federation off), or a secret for no peer |
"""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured

from ..conf import get_settings
from .config import read

HINT = "See docs/FEDERATION.md, Configuration: MESSAGING_NODE, MESSAGING_PEERS, MESSAGING_PEER_SECRETS."


@register("messaging")
def check_federation(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        conf = get_settings()
    except ImproperlyConfigured:
        return []  # messaging.E001 says why
    _, problems = read(conf)
    return [
        (Error if problem.id.startswith("messaging.E") else Warning)(problem.message, hint=HINT, id=problem.id)
        for problem in problems
    ]
