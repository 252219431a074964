from django.contrib import admin
from django.urls import include, path

from . import guests

urlpatterns = [
    path("admin/", admin.site.urls),
    # The demo's own: a guest account for whoever gives a name.
    path("login/", guests.guest_login, name="login"),
    # The chat page (/) and its sign-out (POST /logout/): the contrib app.
    path("", include("messaging.contrib.chat.urls")),
    # /healthz and /metrics.
    path("", include("messaging.urls")),
]
