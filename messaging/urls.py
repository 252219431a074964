from django.urls import path

from . import views
from .ops import health

urlpatterns = [
    path("", views.chat, name="messaging-chat"),
    path("login/", views.guest_login, name="messaging-login"),
    path("logout/", views.sign_out, name="messaging-logout"),
    path("healthz", health.healthz, name="messaging-healthz"),
    path("metrics", health.metrics_view, name="messaging-metrics"),
]
