"""The moderation audit in the admin: who invited, removed or deleted what, where and when.

Read-only like the rest of the app's admin (messaging/admin.py): an audit is
a record of what happened, not something to edit.
"""
from __future__ import annotations

from django.contrib import admin

from ..admin import InspectionAdmin
from ..models import ModerationAction


@admin.register(ModerationAction)
class ModerationActionAdmin(InspectionAdmin):
    list_display = ("at", "actor", "kind", "target", "room_slug", "seq")
    list_filter = ("kind", "at")
    search_fields = ("room_slug",)
    date_hierarchy = "at"
    list_select_related = ("actor", "target")
    fields = ("at", "actor", "kind", "target", "room", "room_slug", "seq")
    readonly_fields = fields
