from django.urls import path

from . import views
from .ops import health
from .transport.http import views as api

urlpatterns = [
    path("", views.chat, name="messaging-chat"),
    path("login/", views.guest_login, name="messaging-login"),
    path("logout/", views.sign_out, name="messaging-logout"),
    path("healthz", health.healthz, name="messaging-healthz"),
    path("metrics", health.metrics_view, name="messaging-metrics"),
    path("api/commands", api.commands, name="messaging-api-commands"),
    path("api/openapi.json", api.openapi, name="messaging-api-openapi"),
]
