"""Users as commands name them (a user id of the host's key type) and as frames show them (`{id, name}`)."""

from __future__ import annotations

import re
import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.db import models

from ..core.exceptions import Forbidden, Invalid
from .messages import display_name
from .nodes import remote_identity, with_node

UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
INT64 = range(-(2**63), 2**63)


def optional_user_id(data: dict[str, Any], key: str) -> Any:
    """A user id of the host's key type, as frames carry one: an integer for
    an integer key, a UUID's text (8-4-4-4-12 hex digits) for a UUID key, a
    string for any other; None if absent. Anything else is `Invalid`, so no
    value reaches the database that it cannot compare with the key."""
    value = data.get(key)
    if value is None:
        return None
    pk = get_user_model()._meta.pk
    if isinstance(pk, models.IntegerField):
        # bool is an int in Python, but true is not a user id.
        if isinstance(value, int) and not isinstance(value, bool) and value in INT64:
            return value
        raise Invalid(f"{key} must be a user id (an integer)")
    if isinstance(pk, models.UUIDField):
        if isinstance(value, str) and UUID_TEXT.fullmatch(value):
            return uuid.UUID(value)
        raise Invalid(f"{key} must be a user id (a UUID)")
    if isinstance(value, str) and (pk.max_length is None or len(value) <= pk.max_length):
        return value
    raise Invalid(f"{key} must be a user id (a string)")


def required_user(d: dict[str, Any]) -> Any:
    """`d`'s `user`, a user id of the host's key type; `Invalid` if absent or not one."""
    user = optional_user_id(d, "user")
    if user is None:
        raise Invalid("user must be a user id")
    return user


def target_user(user_id: Any) -> Any:
    """The active user `user_id` a command names; `Invalid` if there is none."""
    target = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if target is None:
        raise Invalid("no such user")
    return target


def local_target(user_id: Any) -> Any:
    """`target_user`, one of this deployment's own: a user of another (messaging/chat/nodes.py)
    is `Forbidden` a private room's invitation, which only public rooms are shared to answer."""
    target = target_user(user_id)
    if remote_identity(target) is not None:
        raise Forbidden("this user is of another deployment: only public rooms are shared between deployments")
    return target


def person(user: Any) -> dict[str, Any]:
    """A user as frames show them to others: never the account name (`display_name`)."""
    return with_node({"id": user.pk, "name": display_name(user)}, user)
