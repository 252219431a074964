"""API tokens in the Django admin: create one (shown once), revoke, see when each was last used.

Unlike the rest of the admin (read-only history), tokens are credentials an
operator manages: adding makes a token and shows it once in a message,
revoking stamps `revoked_at`; a token is never edited or shown again.
"""
from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from ...models import ApiToken
from ..tokens import check_room_for_token, create_token


class NewTokenForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ("user", "name")

    def clean(self) -> dict:
        cleaned = super().clean()
        if cleaned.get("user") is not None:
            try:
                check_room_for_token(cleaned["user"])
            except ValidationError as exc:
                raise forms.ValidationError(exc.messages) from None
        return cleaned


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "user", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    list_select_related = ("user",)
    search_fields = ("name", "prefix", "user__username")
    ordering = ("-pk",)
    actions = ["revoke"]
    raw_id_fields = ("user",)

    def get_form(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = NewTokenForm
        return super().get_form(request, obj, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        if obj is None:
            return ()
        return ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            return
        _, token = create_token(obj.user, obj.name, instance=obj)
        messages.warning(request, f"The new token, shown this once: {token}")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Revoked, not deleted: its last use stays on record.
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        revoked = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"{revoked} tokens revoked.")
