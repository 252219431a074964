"""The app's operational views, the mentions a page shows as its badge (messaging/events/views.py),
the HTTP API and the requests of federated peers (messaging/federation/views.py).
The chat page is `messaging.contrib.chat.urls`; sign-in is the host's."""

from django.urls import path

from .events import views as events_views
from .federation import views as federation
from .ops import health
from .transport.http import downloads, uploads
from .transport.http import views as api

urlpatterns = [
    path("healthz", health.healthz, name="messaging-healthz"),
    path("metrics", health.metrics_view, name="messaging-metrics"),
    path("mentions", events_views.mentions, name="messaging-mentions"),
    path("mentions/read", events_views.mentions_read, name="messaging-mentions-read"),
    path("api/commands", api.commands, name="messaging-api-commands"),
    path("api/openapi.json", api.openapi, name="messaging-api-openapi"),
    # Files (PROTOCOL.md 1.2): POST a file; GET it at the url it was answered with.
    path("api/uploads", uploads.uploads, name="messaging-api-uploads"),
    # Any text: what is no upload's id is answered as any file the caller may not have (404, JSON).
    path("api/uploads/<str:upload>", downloads.download, name="messaging-api-upload"),
    # Requests of federated peers, each signed (docs/FEDERATION.md).
    path("federation/commands", federation.commands, name="messaging-federation-commands"),
    path("federation/changes", federation.changes, name="messaging-federation-changes"),
    path("federation/fetch", federation.fetch, name="messaging-federation-fetch"),
]
