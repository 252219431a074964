import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostsite.settings")
django_asgi_app = get_asgi_application()

from django.conf import settings  # noqa: E402

if settings.DEBUG:
    # As `runserver` does: the app's page loads its scripts and styles (a
    # deployment serves them with whitenoise or its web server).
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_asgi_app = ASGIStaticFilesHandler(django_asgi_app)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from messaging import UploadLimit  # noqa: E402

# The module paths of 0.2, as a host written then has them (they alias the moved modules).
from messaging.origins import SameOriginValidator  # noqa: E402
from messaging.routing import websocket_urlpatterns  # noqa: E402

# 3. the WebSocket route, /ws/, behind the session and the Origin check; uploads
# over MAX_UPLOAD_BYTES refused before Django reads them
application = ProtocolTypeRouter(
    {
        "http": UploadLimit(django_asgi_app),
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
