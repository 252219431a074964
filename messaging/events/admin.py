"""The events in the admin: the outbox and the dead letters, read-only like the rest."""
from __future__ import annotations

from django.contrib import admin

from ..admin import InspectionAdmin, pretty_json
from .models import DeadLetter, Event


@admin.register(Event)
class EventAdmin(InspectionAdmin):
    list_display = ("event_id", "type", "room", "position", "created_at", "published_at")
    list_filter = ("type", ("published_at", admin.EmptyFieldListFilter))
    search_fields = ("=event_id", "room")
    fields = ("event_id", "type", "room", "position", "created_at", "published_at", "payload")
    readonly_fields = fields

    @admin.display(description="data")
    def payload(self, event: Event) -> str:
        return pretty_json(event.data)


@admin.register(DeadLetter)
class DeadLetterAdmin(InspectionAdmin):
    list_display = ("event_id", "group", "attempts", "created_at")
    list_filter = ("group", "created_at")
    search_fields = ("=event_id",)
    fields = ("group", "event_id", "attempts", "error", "created_at", "payload")
    readonly_fields = fields

    @admin.display(description="event")
    def payload(self, letter: DeadLetter) -> str:
        return pretty_json(letter.event)
