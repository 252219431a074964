"""The base of the admin's read-only pages: permissions that only inspect, and how values are shown.

Used by the app's admin (messaging/admin.py) and the events' (messaging/events/admin.py).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html

from ..core.protocol import format_time


class ReadOnly:
    """Permissions of an admin that only inspects."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class InspectionAdmin(ReadOnly, admin.ModelAdmin):  # type: ignore[type-arg]
    # Newest first, by the primary key's index.
    ordering = ("-pk",)
    # "N of M" would count the whole table once more on every filtered page.
    show_full_result_count = False


def pretty_json(value: Any) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))


def exact(at: datetime | None, empty: str = "-") -> str:
    # To the microsecond in UTC, as on the wire: the default display stops at
    # the minute, where a receipt and the move it completed look the same.
    return format_time(at) if at else empty
