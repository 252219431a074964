"""Federation's table: which rooms of this deployment are shared with which peer, and how far each peer has taken their changes.

Part of the `messaging` app (its migrations); `messaging/models.py` imports it.
"""

from __future__ import annotations

from django.db import models


class PeerRoom(models.Model):
    """A room of this deployment (its home) that a peer has members in.

    Made when a user of the peer first joins the room; from then on every
    change of the room is pushed to the peer (messaging/federation/pushing.py).
    `position` is the room's event position (`Event.position`) up to which
    the peer has answered that it took them: the pusher's durable cursor,
    which moves only forward and only on the peer's answer. Kept after the
    peer's last member leaves: the peer's replica stays current at the cost
    of a push per change.
    """

    room = models.ForeignKey("messaging.Room", on_delete=models.CASCADE, related_name="peers", db_index=False)
    peer = models.CharField(max_length=16)
    position = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["room", "peer"], name="messaging_peerroom_unique")]
        # The pusher reads one peer's rooms.
        indexes = [models.Index(fields=["peer", "room"], name="messaging_peerroom_peer")]

    def __str__(self) -> str:
        return f"{self.room_id} to {self.peer} at {self.position}"
