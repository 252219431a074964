from django.http import HttpResponse
from django.urls import include, path

from . import signin


def home(request):
    return HttpResponse("the host project's own page")


urlpatterns = [
    path("hello/", home),
    path("login/", signin.sign_in),  # the host's own sign-in (LOGIN_URL)
    # 2. the chat page at / and its sign-out, POST /logout/ (the contrib app)
    path("", include("messaging.contrib.chat.urls")),
    # 2. the operational views, /healthz and /metrics
    path("", include("messaging.urls")),
]
