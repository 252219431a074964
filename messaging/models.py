"""Rooms, memberships with receipt watermarks and their history, messages, and durable command records."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Greatest
from django.utils import timezone


class Room(models.Model):
    # A room's slug (64 characters), or a replica's address of a room whose home is
    # another deployment: `slug@node` (messaging/federation, PROTOCOL.md 1.2).
    slug = models.CharField(max_length=81, unique=True)
    # The last seq handed out. Incremented under the room's row lock in the
    # transaction that stores the message, so seqs are gapless: a rollback
    # takes its number back with it.
    last_seq = models.PositiveBigIntegerField(default=0)
    # The last event position handed out (messaging/events/outbox.py), under
    # the same row lock: gapless per room, like last_seq.
    last_event = models.PositiveBigIntegerField(default=0, db_default=0)
    # The last rev handed out: one counter for every change of the room
    # (posts, edits, deletes, reaction changes), taken under the same row
    # lock in the change's transaction, so revs are gapless and in commit
    # order (messaging/chat/revs.py). Defaults in the database too, for a
    # process of the version before it during a rolling deploy.
    last_rev = models.PositiveBigIntegerField(default=0, db_default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    # Who created it by joining its slug first: the rooms a user may create
    # per hour are counted here (`ROOMS_CREATED_PER_HOUR`). None for rooms
    # made otherwise, or before it was recorded. Its index is the composite one.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="rooms_created",
        db_index=False,
    )
    # A private room (PROTOCOL.md 1.1) is seen, joined and used by its members only.
    private = models.BooleanField(default=False, db_default=False)
    # Who made it with `room.create`: it moderates the room (messaging/chat/policy.py).
    # A room made by `room.join` has none. Not `created_by`, which counts joins too.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="rooms_owned"
    )
    # The client address it was created from (messaging/transport/addresses.py:
    # an IPv4 address or an IPv6 /64): the rooms one address may create per
    # hour are counted here (`ROOMS_CREATED_PER_ADDRESS_PER_HOUR`). None for
    # rooms made by server code, or before it was recorded.
    created_from = models.CharField(max_length=64, null=True, blank=True)

    class Meta:
        ordering = ["slug"]
        indexes = [
            models.Index(fields=["created_by", "created_at"], name="messaging_room_created_by"),
            models.Index(
                fields=["created_from", "created_at"],
                name="messaging_room_created_from",
                condition=models.Q(created_from__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return self.slug


# A foreign key that leads a unique constraint or an index gets no index of its
# own (`db_index=False`): the composite one serves its lookups and cascades,
# and every insert would write one more index entry (WAL) for nothing. Posts
# wrote 17 % less WAL without the three on their path (docs/PERFORMANCE.md).


class Membership(models.Model):
    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="memberships", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    # The room's last seq when the user joined: the user is a recipient of
    # every later message it did not send itself.
    joined_seq = models.PositiveBigIntegerField(default=0)
    joined_at = models.DateTimeField(auto_now_add=True)
    # Cumulative receipt watermarks: only ever move forward, read <= delivered.
    delivered = models.PositiveBigIntegerField(default=0)
    read = models.PositiveBigIntegerField(default=0)
    # The watermarks of this member's newest move that `prune_watermark_moves`
    # deleted: when it reached a seq at or below them is no longer known.
    # Defaults in the database too: a process of the version before them,
    # still running during a rolling deploy, inserts memberships without them.
    pruned_delivered = models.PositiveBigIntegerField(default=0, db_default=0)
    pruned_read = models.PositiveBigIntegerField(default=0, db_default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["room", "user"], name="messaging_membership_unique"),
            models.CheckConstraint(
                condition=models.Q(read__lte=models.F("delivered")), name="messaging_read_lte_delivered"
            ),
        ]
        indexes = [
            # The receipts' function (migration 0016) and the ORM's form read the room's
            # two lowest effective watermarks and its two earliest members:
            # two rows of each, whatever the room's size.
            models.Index(models.F("room"), Greatest("delivered", "joined_seq"), name="messaging_member_eff_delivered"),
            models.Index(models.F("room"), Greatest("read", "joined_seq"), name="messaging_member_eff_read"),
            models.Index(fields=["room", "joined_seq"], name="messaging_member_joined"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.room}"


class WatermarkMove(models.Model):
    """One forward move of a member's watermarks, written with the move.

    A watermark says how far a member got, not when it passed a given seq.
    Because watermarks only grow, the first move that reached `seq` is when
    that member's client delivered (read) the message: this history is what
    the admin shows per recipient.
    """

    membership = models.ForeignKey(Membership, on_delete=models.CASCADE, related_name="moves", db_index=False)
    # The watermarks after the move.
    delivered = models.PositiveBigIntegerField()
    read = models.PositiveBigIntegerField()
    at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["membership", "delivered"], name="messaging_move_delivered"),
            models.Index(fields=["membership", "read"], name="messaging_move_read"),
        ]

    def __str__(self) -> str:
        return f"{self.membership} to {self.delivered}/{self.read}"


class MessageState(models.TextChoices):
    SENT = "sent"
    DELIVERED = "delivered"
    READ = "read"


class Message(models.Model):
    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="messages", db_index=False)
    seq = models.PositiveBigIntegerField()
    sender = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    client_msg_id = models.CharField("client id", max_length=64)
    body = models.TextField()
    state = models.CharField(max_length=9, choices=MessageState.choices, default=MessageState.SENT)
    sent_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)
    read_at = models.DateTimeField(null=True, blank=True)
    # 1 when posted, one more per edit or delete: a client never lets an
    # older change overwrite a newer one, however its frames are ordered.
    version = models.PositiveIntegerField(default=1, db_default=1)
    # The rev of the post, and of the message's latest change: `room.join`
    # with `since_rev` sends a message once, in its current state, as the
    # frame of its post if that is after `since_rev`, else of its latest
    # change (messaging/chat/replay.py). Null for messages stored before revs.
    posted_rev = models.PositiveBigIntegerField(null=True, blank=True)
    rev = models.PositiveBigIntegerField(null=True, blank=True)
    edited_at = models.DateTimeField(null=True, blank=True)
    # A deleted message is a tombstone: same seq, body "" (really removed), this time.
    deleted_at = models.DateTimeField(null=True, blank=True)
    # The `event_id` of its post's `message.posted` event: a delete finds the
    # event, and every copy of it, by this (the events' unique index), and
    # blanks their body (messaging/events/redaction.py). No index of its own:
    # a post writes 16 bytes more and no index entry. Null with the outbox
    # off, and for messages posted before it was recorded.
    posted_event_id = models.UUIDField(null=True, blank=True)
    # Its files (`room.post`'s `attachments`), as its `msg` frames list them less
    # their `url`: read with the row, never looked up. Null without files (no
    # byte in a post's row) and after a delete, which removes the files too.
    attachments = models.JSONField(null=True, blank=True)
    # Where it is a reply, its root's seq (`reply_to`, messaging/chat/threads.py; the index below).
    reply_to = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["room", "seq"]
        indexes = [
            # The two halves of a `since_rev` replay, each a range scan. The
            # second holds only messages changed after their post: a post
            # writes no entry in it (a post's WAL is the hot path's).
            models.Index(fields=["room", "posted_rev"], name="messaging_message_posted_rev"),
            models.Index(
                fields=["room", "rev"], name="messaging_message_rev", condition=models.Q(rev__gt=models.F("posted_rev"))
            ),
            models.Index(
                fields=["room", "reply_to", "seq"],
                name="messaging_message_replies",
                condition=models.Q(reply_to__isnull=False),
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["room", "seq"], name="messaging_message_room_seq"),
            # The backstop of exactly-once for posts: even with Redis gone, a
            # second row for the same (sender, client id) cannot commit.
            models.UniqueConstraint(fields=["sender", "client_msg_id"], name="messaging_message_sender_client_id"),
        ]

    def __str__(self) -> str:
        return f"{self.room}#{self.seq}"


class CommandRecord(models.Model):
    """The durable result of one exactly-once command, committed with its effect."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="command_records", db_index=False
    )
    command_id = models.CharField(max_length=64)
    type = models.CharField(max_length=64)
    fingerprint = models.CharField(max_length=64)
    result = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "command_id"], name="messaging_command_user_id"),
        ]
        indexes = [models.Index(fields=["created_at"], name="messaging_command_created")]

    def __str__(self) -> str:
        return f"{self.type} {self.command_id}"


class MessageVersion(models.Model):
    """One edit or delete of a message: when, and, while `EDIT_HISTORY_RETENTION`
    says, the body it replaced. A delete removes every body kept here too."""

    class Kind(models.TextChoices):
        EDIT = "edit"
        DELETE = "delete"

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="versions", db_index=False)
    # The version this change made (2, 3, ...).
    version = models.PositiveIntegerField()
    kind = models.CharField(max_length=6, choices=Kind.choices)
    # Who made the change (a moderator's delete is not the sender's).
    by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    at = models.DateTimeField()
    # The body before this edit; None when history is off, once pruned, and after a delete.
    previous_body = models.TextField(null=True, blank=True)
    # The `event_id` of this change's event (`message.edited`, `message.deleted`), as
    # `Message.posted_event_id` is its post's. Null with the outbox off, and before it was recorded.
    event_id = models.UUIDField(null=True, blank=True)

    class Meta:
        ordering = ["message", "version"]
        constraints = [models.UniqueConstraint(fields=["message", "version"], name="messaging_version_unique")]
        indexes = [models.Index(fields=["at"], name="messaging_version_at")]

    def __str__(self) -> str:
        return f"{self.message} v{self.version}"


class DirectRoom(models.Model):
    """The private room of two users (`dm.open`): one per pair, whoever opens it.

    The pair is stored in a fixed order (`low` < `high` by the id's text), so
    the unique constraint makes two concurrent first `dm.open`s of the same
    pair, from either side, on any process, end in one room.
    """

    room = models.OneToOneField(Room, on_delete=models.CASCADE, primary_key=True, related_name="direct")
    low = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False)
    high = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["low", "high"], name="messaging_direct_pair")]

    def __str__(self) -> str:
        return f"{self.low_id} and {self.high_id}"


class Invitation(models.Model):
    """A request to join a room (`room.invite`, `dm.open`: PROTOCOL.md 1.2,
    "Invitations are requests"), or the answer no to one.

    Apart from `Membership` on purpose: everything that reads memberships
    (the posts' statement, the receipts' function, presence, member lists,
    unread, mentions) counts every row there as a member, and an invitee is
    nobody in the room until it accepts. Accepting (`room.join`) deletes
    the row and makes the membership; declining (`room.leave`) keeps it
    with `declined_at`, which a member who leaves writes too: it is what
    keeps a room from inviting them again at once (messaging/chat/invitations.py).
    One row per room and user, reused by a later invitation.
    """

    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="invitations", db_index=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="invitations", db_index=False
    )
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # When it was (last) sent: the order `rooms.list` lists pending ones in.
    created_at = models.DateTimeField(default=timezone.now)
    # When the user declined it or left the room; None while it waits for an answer.
    declined_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["room", "user"], name="messaging_invitation_unique")]
        indexes = [
            # A user's invitations, the newest first (`rooms.list` lists the
            # pending ones); whole, not partial: it serves the user key's cascade too.
            models.Index(fields=["user", "-created_at"], name="messaging_invitation_user"),
        ]

    @property
    def pending(self) -> bool:
        return self.declined_at is None

    def __str__(self) -> str:
        return f"{self.user_id} to {self.room_id}"


class ModerationAction(models.Model):
    """One moderation action, for the admin's audit: who did what to whom, where.

    It outlives what it names: the room's slug and the users' ids are kept
    as text when the rows are deleted.
    """

    class Kind(models.TextChoices):
        REMOVE = "remove", "removed a member"
        INVITE = "invite", "invited a member"
        DELETE = "delete", "deleted a message"

    room = models.ForeignKey(Room, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    room_slug = models.CharField(max_length=64)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    target = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # The message's seq, for a delete.
    seq = models.PositiveBigIntegerField(null=True, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # `prune_moderation_actions` reads the oldest first.
        indexes = [models.Index(fields=["at"], name="messaging_moderation_at")]

    def __str__(self) -> str:
        return f"{self.actor_id} {self.kind} in {self.room_slug}"


class ApiToken(models.Model):
    """A user's credential for the HTTP API and for sockets of bots (messaging/transport/tokens.py).

    Only the token's SHA-256 is kept, with its first characters to tell it
    from the user's others.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=64, blank=True)
    prefix = models.CharField(max_length=12, editable=False)
    # None until the admin's page of the new token shows it: the token is made
    # then, so it is never kept anywhere between the form and that page.
    digest = models.CharField(max_length=64, unique=True, null=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # Written at most once a minute (`TOKEN_TOUCH_INTERVAL`): requests stay reads.
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # None: never. From then on the token signs nobody in, and its sockets are closed.
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'unnamed'})"

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])


# The events' tables are the app's too (messaging/events/models.py).
# Federation's, the uploads', and threads' and reactions' (messaging/chat/models.py).
from .chat.models import Reaction, ReactionTally, Thread  # noqa: E402, F401
from .events.models import (  # noqa: E402, F401
    DeadLetter,
    Event,
    InboxRecord,
    Notification,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from .federation.models import PeerRoom as PeerRoom  # noqa: E402
from .files.models import Upload  # noqa: E402, F401
