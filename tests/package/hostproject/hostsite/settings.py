"""Settings of a host project that adds `messaging`: the steps of docs/INTEGRATION.md and nothing else.

Reads `HOST_DATABASE` (an SQLite file) and `REDIS_URL` from the environment;
`HOST_DATABASE_URL` (postgres://user@host:port/name) puts it on PostgreSQL
instead, and `HOST_UUID_USERS=1` gives it a user model keyed by UUID.
"""

import os
from pathlib import Path
from urllib.parse import urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "host-project-test-key"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.staticfiles",
    "channels",
    "messaging",  # 1. the app
    "messaging.contrib.chat",  # 1. its chat page (optional)
    "messaging.contrib.reactions",  # and its "+1" reactions (optional)
    "wallet",  # the host's own app, with its own command type
]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]

ROOT_URLCONF = "hostsite.urls"
ASGI_APPLICATION = "hostsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],  # the host's own (its sign-in form)
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
            ]
        },
    }
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("HOST_DATABASE", BASE_DIR / "db.sqlite3"),
        # Concurrent commands wait for each other's write lock instead of failing.
        "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
    }
}
if os.environ.get("HOST_DATABASE_URL"):
    url = urlsplit(os.environ["HOST_DATABASE_URL"])
    DATABASES["default"] = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": url.path.lstrip("/"),
        "USER": url.username or "",
        "PASSWORD": url.password or "",
        "HOST": url.hostname or "",
        "PORT": url.port or "",
    }

if os.environ.get("HOST_UUID_USERS") == "1":
    INSTALLED_APPS.append("accounts")
    AUTH_USER_MODEL = "accounts.User"

REDIS_URL = os.environ["REDIS_URL"]

# 3. a channel layer every server process shares; socket_timeout None, or
# the layer's 5 s blocking poll times out (system check messaging.E002).
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": None}]},
    }
}

# 4. the app's settings
MESSAGING = {
    "REDIS_URL": REDIS_URL,
    "METRICS_TOKEN": "host-metrics-token",
    # The host's own room policy (docs/INTEGRATION.md): team rooms are its groups'.
    "ROOM_POLICY": "wallet.policy.TeamPolicy",
}
# The app's default policy instead, under which posts on PostgreSQL take the batch statement
# (a policy's own `can_post` is asked by the portable path only).
if os.environ.get("HOST_DEFAULT_POLICY"):
    del MESSAGING["ROOM_POLICY"]

# 5. where uploaded files are kept: the default storage (here the file system)
MEDIA_ROOT = BASE_DIR / "media"

LOGIN_URL = "/login/"  # where the chat page sends a visitor who is not signed in
STATIC_URL = "static/"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
