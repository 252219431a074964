from django.http import HttpResponse
from django.urls import include, path


def home(request):
    return HttpResponse("the host project's own page")


urlpatterns = [
    path("hello/", home),
    # 2. the app's pages: the chat page at /, /login/, /healthz, /metrics
    path("", include("messaging.urls")),
]
