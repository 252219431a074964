"""The host's receivers of the app's signals (docs/INTEGRATION.md, "Signals"): each one heard is a row."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from messaging import signals

from .models import Heard


def heard(name: str, room: str, user: Any, command_id: str, seq: int | None = None) -> None:
    Heard.objects.create(signal=name, room=room, user=str(user.pk), command_id=command_id, seq=seq)


@receiver(signals.message_posted, dispatch_uid="wallet-posted")
def posted(
    sender: Any, room: str, seq: int, user: Any, command_id: str, message: dict[str, Any], **kwargs: Any
) -> None:
    assert message["seq"] == seq and message["room"] == room
    heard("message_posted", room, user, command_id, seq)


@receiver(signals.message_edited, dispatch_uid="wallet-edited")
def edited(sender: Any, room: str, seq: int, user: Any, command_id: str, **kwargs: Any) -> None:
    heard("message_edited", room, user, command_id, seq)


@receiver(signals.message_deleted, dispatch_uid="wallet-deleted")
def deleted(sender: Any, room: str, seq: int, user: Any, command_id: str, **kwargs: Any) -> None:
    heard("message_deleted", room, user, command_id, seq)


@receiver(signals.member_joined, dispatch_uid="wallet-joined")
def joined(sender: Any, room: str, user: Any, command_id: str, **kwargs: Any) -> None:
    heard("member_joined", room, user, command_id)


@receiver(signals.member_left, dispatch_uid="wallet-left")
def left(sender: Any, room: str, user: Any, command_id: str, **kwargs: Any) -> None:
    heard("member_left", room, user, command_id)


@receiver(signals.message_posted, dispatch_uid="wallet-broken")
def broken(sender: Any, room: str, **kwargs: Any) -> None:
    """A receiver that fails, in one room: logged, and the post and the other receivers go on."""
    if room == "signals-broken":
        raise RuntimeError("this receiver fails on purpose")
