"""The events in the admin: the outbox, dead letters, webhook deliveries and their
attempts, mentions, read-only like the rest; webhook endpoints are the host's
configuration, so those are edited here."""

from __future__ import annotations

from django.contrib import admin
from django.db import models

from ..ops.inspection import InspectionAdmin, ReadOnly, exact, pretty_json
from .models import DeadLetter, Event, Notification, WebhookAttempt, WebhookDelivery, WebhookEndpoint


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


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: not subscriptable at run time
    list_display = ("url", "active", "types", "created_at")
    list_filter = ("active",)
    fields = ("url", "secret", "types", "active")
    # A URL typed without a scheme is taken as https, Django 6's default.
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}


class WebhookAttemptInline(ReadOnly, admin.TabularInline):  # type: ignore[type-arg]  # generic in django-stubs only: not subscriptable at run time
    model = WebhookAttempt
    fields = ("when", "status", "error", "seconds")
    readonly_fields = fields
    extra = 0
    ordering = ("at",)

    @admin.display(description="at")
    def when(self, attempt: WebhookAttempt) -> str:
        return exact(attempt.at)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(InspectionAdmin):
    list_display = ("event_id", "endpoint", "state", "attempts", "next_attempt_at", "finished_at")
    list_filter = ("state", "endpoint")
    search_fields = ("=event_id",)
    list_select_related = ("endpoint",)
    fields = ("endpoint", "event_id", "state", "attempts", "next_attempt_at", "created_at", "finished_at", "payload")
    readonly_fields = fields
    inlines = (WebhookAttemptInline,)

    @admin.display(description="event")
    def payload(self, delivery: WebhookDelivery) -> str:
        return pretty_json(delivery.event)


@admin.register(Notification)
class NotificationAdmin(InspectionAdmin):
    list_display = ("user", "room", "seq", "sender_name", "email", "emailed_at", "created_at", "read_at")
    list_filter = ("email", "created_at")
    list_select_related = ("user",)
    fields = (
        "user",
        "event_id",
        "room",
        "seq",
        "sender_name",
        "body",
        "email",
        "emailed_at",
        "digest",
        "due_at",
        "created_at",
        "read_at",
    )
    readonly_fields = fields
