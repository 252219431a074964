"""0.2's `messaging.views`: its operational views are `messaging.ops.health` now, and the
chat page's are `messaging.contrib.chat.views`. The demo's guest sign-in is the demo's
(`project/guests.py`): the reusable app makes no accounts."""

from __future__ import annotations

from .ops.health import healthz, metrics_view  # noqa: F401 (0.2 documented them as messaging.views.*)
