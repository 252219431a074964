"""The tables of threads and emoji reactions (PROTOCOL.md 1.2): a root's reply count, and who put which emoji on what.

They belong to the `messaging` app (its migrations), so a host adds nothing
to `INSTALLED_APPS`; `messaging/models.py` imports them.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Thread(models.Model):
    """A message with replies (a root): how many, the time of the latest, and the room's rev of it.

    A row of its own, made by the first reply: a post without `reply_to`
    writes nothing here, and frames read it with the message (one join).
    `rev` is the rev of its latest change, which the latest reply's post
    took right after its own: a `since_rev` replay finds a room's changed
    threads by (room, rev).
    """

    root = models.OneToOneField("messaging.Message", on_delete=models.CASCADE, primary_key=True, related_name="thread")
    room = models.ForeignKey("messaging.Room", on_delete=models.CASCADE, related_name="+", db_index=False)
    replies = models.PositiveIntegerField(default=0)
    last_reply_at = models.DateTimeField()
    rev = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["room", "rev"], name="messaging_thread_rev")]

    def __str__(self) -> str:
        return f"{self.root_id}: {self.replies} replies"


class Reaction(models.Model):
    """One user's emoji on one message (`reaction.set`): at most one row per (message, user, emoji)."""

    message = models.ForeignKey("messaging.Message", on_delete=models.CASCADE, related_name="+", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False)
    # 1-16 characters (PROTOCOL.md 1.2); a column of characters on every database.
    emoji = models.CharField(max_length=16)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["message", "user", "emoji"], name="messaging_reaction_one"),
        ]
        indexes = [models.Index(fields=["user"], name="messaging_reaction_user")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.emoji} on {self.message_id}"


class ReactionTally(models.Model):
    """How many users have `emoji` on a message, and the room's rev of its latest change.

    Kept at 0 when the last one takes theirs off, so a `since_rev` replay
    still tells it; frames list only the emoji above 0.
    """

    message = models.ForeignKey("messaging.Message", on_delete=models.CASCADE, related_name="+", db_index=False)
    emoji = models.CharField(max_length=16)
    count = models.PositiveBigIntegerField(default=0)
    room = models.ForeignKey("messaging.Room", on_delete=models.CASCADE, related_name="+", db_index=False)
    rev = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["message", "emoji"], name="messaging_reaction_tally_one")]
        indexes = [models.Index(fields=["room", "rev"], name="messaging_reaction_tally_rev")]

    def __str__(self) -> str:
        return f"{self.message_id} {self.emoji} {self.count}"
