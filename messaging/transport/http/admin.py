"""API tokens in the Django admin: create one (shown once, on a page of its own), revoke, see when each was last used.

Unlike the rest of the admin (read-only history), tokens are credentials an
operator manages: adding one saves it without a token and leads to its
page, whose button (a POST, with Django's CSRF check) makes the token as it
shows it (`reveal_token`), with `Cache-Control: no-store`; it is shown this
once, and another request shows only that it was shown. A GET changes
nothing, so another site cannot use a token up before the operator sees it. The token is never in a cookie, the messages
framework, the session or any table (only its hash is kept). Revoking stamps
`revoked_at`; a token is never edited or shown again.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from ...models import ApiToken
from ..tokens import check_room_for_token, reveal_token


class NewTokenForm(forms.ModelForm):  # type: ignore[type-arg]  # generic in django-stubs only: not subscriptable at run time
    class Meta:
        model = ApiToken
        fields = ("user", "name", "expires_at")
        help_texts = {"expires_at": "Leave empty for a token that does not expire."}

    def clean_expires_at(self) -> Any:
        expires_at = self.cleaned_data.get("expires_at")
        if expires_at is not None and expires_at <= timezone.now():
            raise forms.ValidationError("The expiry must be in the future.")
        return expires_at

    def clean(self) -> dict[str, Any]:
        super().clean()  # returns `self.cleaned_data`, which django-stubs types as Optional
        cleaned = self.cleaned_data
        if cleaned.get("user") is not None:
            try:
                check_room_for_token(cleaned["user"])
            except ValidationError as exc:
                raise forms.ValidationError(exc.messages) from None
        return cleaned


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: not subscriptable at run time
    list_display = ("shown_prefix", "name", "user", "created_at", "last_used_at", "expires_at", "revoked_at")
    list_filter = ("revoked_at", "expires_at")
    list_select_related = ("user",)
    search_fields = ("name", "prefix", "user__username")
    ordering = ("-pk",)
    actions = ["revoke"]
    raw_id_fields = ("user",)

    @admin.display(description="prefix", ordering="prefix")
    def shown_prefix(self, obj: ApiToken) -> str:
        return obj.prefix or "(not shown yet)"

    def get_form(
        self, request: HttpRequest, obj: ApiToken | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm[ApiToken]]:
        if obj is None:
            kwargs["form"] = NewTokenForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> tuple[str, ...]:
        if obj is None:
            return ()
        return ("user", "name", "prefix", "created_at", "last_used_at", "expires_at", "revoked_at")

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            return
        # No token yet: its page makes it (`token_view`).
        obj.prefix, obj.digest = "", None
        obj.save()

    def response_add(self, request: HttpRequest, obj: ApiToken, post_url_continue: str | None = None) -> HttpResponse:
        # Straight to the token's page, with no message: the admin's "added"
        # message names the object, and messages travel in a cookie.
        return HttpResponseRedirect(reverse("admin:messaging_apitoken_token", args=[obj.pk]))

    def get_urls(self) -> list[URLPattern]:
        token = path("<int:pk>/token/", self.admin_site.admin_view(self.token_view), name="messaging_apitoken_token")
        return [token, *super().get_urls()]

    def token_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """GET: the token's page, with the button that shows it (or that it was shown). POST: the new
        token, made as it is shown, this once; afterwards, that it was shown."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        row = ApiToken.objects.select_related("user").filter(pk=pk).first()
        if row is None:
            return HttpResponseRedirect(reverse("admin:messaging_apitoken_changelist"))
        pending = row.digest is None and row.revoked_at is None
        token = reveal_token(pk) if request.method == "POST" else None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "row": row,
            "token": token,
            "pending": pending and request.method != "POST",
            "title": "The new API token" if token or pending else "API token already shown",
        }
        response = TemplateResponse(request, "admin/messaging/apitoken/token.html", context)
        # Not kept by the browser, a proxy or the back button (the admin's
        # own `never_cache` says no-store too; this page must not depend on it).
        response["Cache-Control"] = "no-store, no-cache, must-revalidate, private, max-age=0"
        return response

    def has_delete_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        # Revoked, not deleted: its last use stays on record.
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"{revoked} tokens revoked.")
