"""Users across deployments: each one as a local account here, and as `{node, id, name}` on the link.

A user of a peer is an account of this deployment, made the first time it
is seen (`local_users`), named `<node>:<id there>` with an unusable
password, so it cannot sign in, and with its display name as first name
(messaging/chat/nodes.py reads its home from the name). On the link every
user is written by its home identity (`wire`): its home's name and its id
there, as text, whatever the host's key type, and its display name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.core.exceptions import ValidationError

from ..chat.messages import display_name
from ..chat.nodes import remote_account_name, remote_identity

# Django's user model holds a first name of 150 characters.
NAME_CHARS = 150


def wire(user: Any, own: str) -> dict[str, Any]:
    """`user` as the link writes it: `{node, id, name}` at its home deployment."""
    remote = remote_identity(user)
    node, user_id = remote if remote is not None else (own, str(user.pk))
    return {"node": node, "id": user_id, "name": display_name(user)}


def wire_many(user_ids: Iterable[Any], own: str) -> dict[Any, dict[str, Any]]:
    """`wire` of each user of `user_ids`, by id, in one query."""
    users = get_user_model().objects.filter(pk__in=set(user_ids))
    return {user.pk: wire(user, own) for user in users}


def identity_of(value: Any) -> tuple[str, str, str] | None:
    """(node, id, name) of a `{node, id, name}` the link carried, or None if it is not one."""
    if not isinstance(value, dict):
        return None
    node, user_id, name = value.get("node"), value.get("id"), value.get("name", "")
    if not (isinstance(node, str) and isinstance(user_id, str) and isinstance(name, str)):
        return None
    if not (0 < len(user_id) <= 128 and len(node) <= 16):
        return None
    return node, user_id, name


def local_users(identities: Iterable[tuple[str, str, str]], own: str) -> dict[tuple[str, str], Any]:
    """The local account of each (node, id, name): this deployment's own user for `own`'s
    ids (left out if there is none), a peer's user's account, made if new, for the rest."""
    wanted = {(node, user_id): name for node, user_id, name in identities}
    model = get_user_model()
    found: dict[tuple[str, str], Any] = {}
    own_ids = {}
    for node, user_id in wanted:
        if node == own:
            try:
                own_ids[model._meta.pk.to_python(user_id)] = user_id
            except ValidationError:
                continue
    for user in model.objects.filter(pk__in=list(own_ids)):
        found[(own, own_ids[user.pk])] = user
    names = {remote_account_name(node, user_id): (node, user_id) for node, user_id in wanted if node != own}
    for user in model.objects.filter(**{f"{model.USERNAME_FIELD}__in": list(names)}):
        key = names.pop(user.get_username())
        found[key] = refreshed(user, wanted[key])
    for username, key in names.items():
        found[key] = account(username, wanted[key])
    return found


def local_user(identity: tuple[str, str, str], own: str) -> Any | None:
    return local_users([identity], own).get(identity[:2])


def account(username: str, name: str) -> Any:
    """The account of a peer's user, made now (or by a concurrent first sight of them)."""
    model = get_user_model()
    # make_password(None): an unusable password, which no sign-in matches.
    user, _ = model.objects.get_or_create(
        **{model.USERNAME_FIELD: username}, defaults={"first_name": name[:NAME_CHARS], "password": make_password(None)}
    )
    return user


def refreshed(user: Any, name: str) -> Any:
    """`user` with the display name its home gives it now."""
    if name and user.first_name != name[:NAME_CHARS]:
        user.first_name = name[:NAME_CHARS]
        user.save(update_fields=["first_name"])
    return user
