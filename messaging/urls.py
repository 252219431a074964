"""The app's operational views. The chat page is `messaging.contrib.chat.urls`; sign-in is the host's."""
from django.urls import path

from .ops import health
from .transport.http import views as api

urlpatterns = [
    path("healthz", health.healthz, name="messaging-healthz"),
    path("metrics", health.metrics_view, name="messaging-metrics"),
    path("api/commands", api.commands, name="messaging-api-commands"),
    path("api/openapi.json", api.openapi, name="messaging-api-openapi"),
]
