"""The demo project's settings plus the bench-only app (the tutorial pattern's model).

Everything else comes from the environment, as in production; the harness sets
`CONN_MAX_AGE=0` for the tutorial pattern's server, Django's default.
"""

from project.settings import *  # noqa: F401,F403
from project.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "bench"]
ASGI_APPLICATION = "bench.asgi.application"
