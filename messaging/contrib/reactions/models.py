from django.db import models


class ReactionCount(models.Model):
    """How many "+1" reactions a message got (the `reaction.add` command type).

    A table of its own, not a column of `Message`: receipts update message rows
    in bulk, and a popular message's reactions should not wait on those locks.
    The table kept the name it had as a model of `messaging` (migration
    `messaging.0010`), so databases made before keep their counts.
    """

    message = models.OneToOneField(
        "messaging.Message", on_delete=models.CASCADE, primary_key=True, related_name="reactions"
    )
    count = models.PositiveBigIntegerField(default=0)
    # The room's rev of the latest change of this count, and the room
    # (the message's, kept here so a `since_rev` replay finds a room's
    # changed counts with one range scan). Null before revs.
    room = models.ForeignKey(
        "messaging.Room", on_delete=models.CASCADE, null=True, blank=True, related_name="+", db_index=False
    )
    rev = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        db_table = "messaging_reactioncount"
        indexes = [models.Index(fields=["room", "rev"], name="messaging_reaction_rev")]

    def __str__(self) -> str:
        return f"{self.message} +{self.count}"
