"""Read-only inspection of rooms, messages and command records in the Django admin.

The admin shows history; it never rewrites it. Nothing here can be added,
changed or deleted: a message's seq, state and stored ack are facts that
clients have already been told. Every list page runs a fixed number of
queries however many rows it shows (related rows are joined, counts are
annotated), and none counts the whole table twice.

The one exception is moderation (`ModeratorActions`): staff delete a
message, or remove a member, of a room they are not a member of (a private
room they cannot make themselves a member of: PROTOCOL.md 1.2) with an
action of the message or membership list, as the room policy allows. Each
act is the command's own effect, with its frames and events, and is
recorded in the moderation audit.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.contrib import admin, messages
from django.db.models import Count, Max, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from .chat.moderation import delete_as_moderator
from .chat.receipts import recipient_receipts
from .core.exceptions import CommandError
from .models import CommandRecord, Invitation, Membership, Message, MessageVersion, ModerationAction, Room
from .ops.inspection import InspectionAdmin, ReadOnly, exact, pretty_json
from .transport.submitting import publish_from_code, submit


class ModeratorActions:
    """The list actions by which staff moderate rooms they are not in; the room
    policy's `can_moderate` decides per room, so a host that narrows who
    moderates narrows these too."""

    # The model admin's, beside which it is mixed in.
    message_user: Callable[..., None]

    def has_moderate_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def told(self, request: HttpRequest, done: int, what: str, refused: list[str]) -> None:
        if done:
            self.message_user(request, f"{what}: {done}, each recorded in the moderation audit.")
        for reason in refused:
            self.message_user(request, reason, level=messages.WARNING)


def reached(yes: bool, at: datetime | None) -> str:
    if not yes:
        return "no"
    # The watermark says it did; the time is known only from recorded moves.
    return exact(at, "yes (time not recorded)")


class MembershipInline(ReadOnly, admin.TabularInline):  # type: ignore[type-arg]  # generic in django-stubs only: not subscriptable at run time
    model = Membership
    fields = ("user", "joined_seq", "joined_at", "delivered", "read", "last_moved")
    readonly_fields = fields
    extra = 0

    def get_queryset(self, request: HttpRequest) -> QuerySet[Membership]:
        rows: QuerySet[Membership] = (
            super()
            .get_queryset(request)
            # The room too: each row's title is the membership's str().
            .select_related("user", "room")
            .annotate(last_moved_at=Max("moves__at"))
            .order_by("joined_at", "pk")
        )
        return rows

    @admin.display(description="watermarks last moved")
    def last_moved(self, membership: Membership) -> str:
        return exact(membership.last_moved_at)  # type: ignore[attr-defined]  # annotated by get_queryset


@admin.register(Room)
class RoomAdmin(InspectionAdmin):
    list_display = ("slug", "private", "owner", "last_seq", "member_count", "created_at")
    list_filter = ("private",)
    list_select_related = ("owner",)
    search_fields = ("slug",)
    fields = ("slug", "private", "owner", "last_seq", "created_at")
    readonly_fields = fields
    inlines = (MembershipInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Room]:
        rooms: QuerySet[Room] = super().get_queryset(request).annotate(members=Count("memberships"))
        return rooms

    @admin.display(description="members", ordering="members")
    def member_count(self, room: Room) -> int:
        members: int = room.members  # type: ignore[attr-defined]  # annotated by get_queryset
        return members


class VersionInline(ReadOnly, admin.TabularInline):  # type: ignore[type-arg]  # generic in django-stubs only: not subscriptable at run time
    """Each edit and delete of a message: when, by whom, and the body it
    replaced while `EDIT_HISTORY_RETENTION` keeps it."""

    model = MessageVersion
    fields = ("version", "kind", "by", "at", "replaced_body")
    readonly_fields = fields
    extra = 0

    def get_queryset(self, request: HttpRequest) -> QuerySet[MessageVersion]:
        return super().get_queryset(request).select_related("by")

    @admin.display(description="body it replaced")
    def replaced_body(self, version: MessageVersion) -> str:
        return "not kept" if version.previous_body is None else version.previous_body


@admin.register(Message)
class MessageAdmin(ModeratorActions, InspectionAdmin):
    list_display = (
        "room",
        "seq",
        "sender",
        "client_msg_id",
        "shown_body",
        "version",
        "state",
        "sent_at",
        "delivered_at",
        "read_at",
    )
    list_display_links = ("room", "seq")
    # Senders: only users who posted, not every guest account ever made.
    list_filter = ("room", "state", ("sender", admin.RelatedOnlyFieldListFilter), "sent_at")
    search_fields = ("client_msg_id", "body")
    date_hierarchy = "sent_at"
    list_select_related = ("room", "sender")
    fields = (
        "room",
        "seq",
        "sender",
        "client_msg_id",
        "shown_body",
        "version",
        "rev",
        "edited_at",
        "deleted_at",
        "state",
        "times",
        "recipients",
        "stored_ack",
    )
    readonly_fields = fields
    inlines = (VersionInline,)
    actions = ("delete_as_moderator",)

    @admin.action(description="Delete the selected messages as a moderator", permissions=("moderate",))
    def delete_as_moderator(self, request: HttpRequest, queryset: QuerySet[Message]) -> None:
        done, refused = 0, []
        for message in queryset.select_related("room"):
            try:
                effect = delete_as_moderator(request.user, message.pk)
            except CommandError as exc:
                refused.append(f"{message.room.slug}#{message.seq} not deleted: {exc}")
                continue
            if effect is not None:
                publish_from_code(effect)
                done += 1
        self.told(request, done, "Messages deleted", refused)

    @admin.display(description="body")
    def shown_body(self, message: Message) -> str:
        # A tombstone's body is gone from the database: say so, not "".
        return "(message deleted)" if message.deleted_at is not None else message.body

    @admin.display(description="sent, delivered, read")
    def times(self, message: Message) -> str:
        return format_html("{} / {} / {}", exact(message.sent_at), exact(message.delivered_at), exact(message.read_at))

    @admin.display(description="recipients")
    def recipients(self, message: Message) -> str:
        members = recipient_receipts(message)
        if not members:
            return "none: nobody else had joined the room when it was posted"
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    m.user,
                    exact(m.joined_at),
                    reached(m.delivered >= message.seq, m.delivered_at),  # type: ignore[attr-defined]  # annotated
                    reached(m.read >= message.seq, m.read_at),  # type: ignore[attr-defined]  # annotated
                )
                for m in members
            ),
        )
        return format_html(
            "<table><thead><tr><th>recipient</th><th>joined</th><th>delivered</th><th>read</th></tr></thead>"
            "<tbody>{}</tbody></table>",
            rows,
        )

    @admin.display(description="stored ack")
    def stored_ack(self, message: Message) -> str:
        record = CommandRecord.objects.filter(user_id=message.sender_id, command_id=message.client_msg_id).first()
        if record is None:
            return "no durable record"
        link = reverse("admin:messaging_commandrecord_change", args=[record.pk])
        return format_html('{}<a href="{}">command record {}</a>', pretty_json(record.result), link, record.pk)


@admin.register(CommandRecord)
class CommandRecordAdmin(InspectionAdmin):
    list_display = ("command_id", "user", "type", "created_at")
    list_filter = ("type", "created_at")
    search_fields = ("command_id",)
    date_hierarchy = "created_at"
    list_select_related = ("user",)
    fields = ("user", "command_id", "type", "fingerprint", "created_at", "stored_ack")
    readonly_fields = fields

    @admin.display(description="stored ack")
    def stored_ack(self, record: CommandRecord) -> str:
        return pretty_json(record.result)


@admin.register(Membership)
class MembershipAdmin(ModeratorActions, InspectionAdmin):
    """Who is a member of which room; staff remove one here from a room they are not in (`room.remove`)."""

    list_display = ("room", "user", "joined_at", "delivered", "read")
    list_filter = ("room__private",)
    search_fields = ("room__slug",)
    list_select_related = ("room", "user")
    fields = ("room", "user", "joined_seq", "joined_at", "delivered", "read")
    readonly_fields = fields
    actions = ("remove_as_moderator",)

    @admin.action(description="Remove the selected members as a moderator", permissions=("moderate",))
    def remove_as_moderator(self, request: HttpRequest, queryset: QuerySet[Membership]) -> None:
        done, refused = 0, []
        for membership in queryset.select_related("room", "user"):
            # The command itself: its checks (not the owner, not oneself), its
            # `room.left` to the member's sockets, its record in the audit.
            ack = submit(request.user, "room.remove", {"room": membership.room.slug, "user": membership.user_id})
            if ack["ok"]:
                done += 1
            else:
                refused.append(f"{membership.user} not removed from {membership.room.slug}: {ack['error']['message']}")
        self.told(request, done, "Members removed", refused)


@admin.register(Invitation)
class InvitationAdmin(InspectionAdmin):
    """Invitations waiting for an answer, and those declined (or rooms left), which keep a room from asking again."""

    list_display = ("room", "user", "invited_by", "created_at", "declined_at")
    list_filter = (("declined_at", admin.EmptyFieldListFilter),)
    search_fields = ("room__slug",)
    list_select_related = ("room", "user", "invited_by")
    fields = ("room", "user", "invited_by", "created_at", "declined_at")
    readonly_fields = fields


@admin.register(ModerationAction)
class ModerationActionAdmin(InspectionAdmin):
    """The moderation audit: who invited, removed or deleted what, where and when."""

    list_display = ("at", "actor", "kind", "target", "room_slug", "seq")
    list_filter = ("kind", "at")
    search_fields = ("room_slug",)
    date_hierarchy = "at"
    list_select_related = ("actor", "target")
    fields = ("at", "actor", "kind", "target", "room", "room_slug", "seq")
    readonly_fields = fields


# The events' tables (messaging/events/admin.py).
from .events import admin as events_admin  # noqa: E402,F401

# API tokens are managed, not only inspected: their admin has its own module.
from .transport.http import admin as _api_tokens  # noqa: E402,F401
