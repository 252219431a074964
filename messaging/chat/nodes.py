"""Which deployment a user belongs to (PROTOCOL 1.2, "Two deployments, one conversation").

With federation on (`NODE` set), every user a frame names carries `node`:
its home deployment. A user of another deployment is an account of this
one (messaging/federation/identities.py makes it) whose account name is
`<node>:<their id there>` and whose password is unusable: so `node_of`
reads a user's home from the user itself, with no query, as frames are
built. An account name of that shape cannot be made through Django's forms
(a colon is not a username character), and such an account cannot sign in.
"""

from __future__ import annotations

import re
from typing import Any

from ..conf import get_settings

# A deployment's name (`NODE`, and each peer's).
NODE_NAME = re.compile(r"[a-z][a-z0-9]{0,15}")
REMOTE_ACCOUNT = re.compile(r"([a-z][a-z0-9]{0,15}):(.{1,128})", re.DOTALL)


def remote_account_name(node: str, user_id: str) -> str:
    """The account name of the user `user_id` of the deployment `node`."""
    return f"{node}:{user_id}"


def remote_identity(user: Any) -> tuple[str, str] | None:
    """(node, id there) of an account that stands for a user of another deployment, else None."""
    found = REMOTE_ACCOUNT.fullmatch(user.get_username() or "")
    if found is None or user.has_usable_password():
        return None
    return found.group(1), found.group(2)


def node_of(user: Any) -> str | None:
    """`user`'s home deployment; None with federation off."""
    own = get_settings().NODE
    if not own:
        return None
    remote = remote_identity(user)
    return own if remote is None else remote[0]


def with_node(person: dict[str, Any], user: Any) -> dict[str, Any]:
    """`person` (a frame's `{id, name}`) with `node` added where federation is on."""
    node = node_of(user)
    if node is not None:
        person["node"] = node
    return person
