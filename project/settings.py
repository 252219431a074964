"""Settings of the demo project, read from the environment only.

Unset variables give the embedded defaults that `make run` needs on a bare
machine: SQLite and the in-memory channel layer. Set `DATABASE_URL` and
`REDIS_URL` for anything real (tests, deployments).
"""

from __future__ import annotations

import importlib.util
from datetime import timedelta
from pathlib import Path
from typing import Any

import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from messaging.conf import options_from_environ, trusted_proxies

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

# Off unless asked for: a forgotten variable must not serve Django's debug
# pages (settings, tracebacks) to the world. `make run` sets DEBUG=1.
DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "Set the SECRET_KEY environment variable: it is required when DEBUG is off (DEBUG=1 uses a development key)"
        )
    SECRET_KEY = "insecure-dev-key-change-me"
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# HTTPS=1 says the site is served over TLS only, and turns on what follows
# from it; each can be set on its own. Off by default: the demo and the
# suite's servers speak plain HTTP on 127.0.0.1, where Secure cookies would
# never come back and a redirect to https would lead nowhere.
HTTPS = env.bool("HTTPS", default=False)
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=HTTPS)
# A load balancer's health check and a scraper often speak plain HTTP to the
# process itself: a redirect would fail them.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
SESSION_COOKIE_SECURE = env.bool("SECURE_COOKIES", default=HTTPS)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# A year, for this host and its subdomains, and consent to browsers' preload
# lists: what `check --deploy` asks for. Hard to take back once browsers have
# seen it: lower HSTS_SECONDS while trying HTTPS out.
SECURE_HSTS_SECONDS = env.int("HSTS_SECONDS", default=365 * 24 * 3600 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("HSTS_INCLUDE_SUBDOMAINS", default=HTTPS)
SECURE_HSTS_PRELOAD = env.bool("HSTS_PRELOAD", default=HTTPS)
# Behind a proxy that terminates TLS: the header it sets to "https" on
# requests that came over TLS (and strips from the client's), e.g.
# X-Forwarded-Proto. Without it such requests look like plain HTTP, and
# SECURE_SSL_REDIRECT would redirect them forever.
PROXY_SSL_HEADER = env.str("PROXY_SSL_HEADER", default="")
if PROXY_SSL_HEADER:
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + PROXY_SSL_HEADER.upper().replace("-", "_"), "https")

INSTALLED_APPS = [
    # Daphne's app only swaps `runserver` for its ASGI one, a tool for
    # development; a deployment runs `daphne` or `uvicorn` itself, and under
    # uvicorn the app would load Twisted, autobahn and OpenSSL for nothing.
    *(["daphne"] if DEBUG else []),
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    # Failed logins per client address (the admin's): django-axes, below.
    "axes",
    "messaging",
    "messaging.contrib.reactions",
    # The chat page at /, its scripts and styles (the demo's sign-in is project/guests.py).
    "messaging.contrib.chat",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a locked-out login into its 429 page.
    "axes.middleware.AxesMiddleware",
]

# Sign-ins by password (the admin's login form) go through django-axes
# first, which refuses an address that failed too often.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

# A Content-Security-Policy on every response (django-csp). Scripts only from
# this origin, no inline ones but the chat page's import map, which its view
# allows by the hash of the very text it serves (messaging/contrib/chat/views.py). Sockets
# only to this origin: 'self' covers ws:// and wss:// of the page's host and
# port (CSP level 3, as Chromium applies it). The favicon is a data: URL.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "connect-src": [SELF],
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

ROOT_URLCONF = "project.urls"
ASGI_APPLICATION = "project.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The demo's own templates (its sign-in form); one named as an app's overrides it.
        "DIRS": [BASE_DIR / "project" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Persistent connections: with CONN_MAX_AGE=0 every database_sync_to_async
# call would open a new PostgreSQL connection, which costs more than the
# command itself (2.8x the acks/s, docs/PERFORMANCE.md). Health checks are
# off: they cost a `SELECT 1` round trip per command (1.18x). Without them a
# connection that died in between fails its next command instead, which is
# answered `unavailable` (nothing applied, the client retries) and closed.
DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=600)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.bool("CONN_HEALTH_CHECKS", default=False)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Concurrent writers wait for each other instead of failing at once.
    DATABASES["default"].setdefault("OPTIONS", {}).update({"timeout": 20, "transaction_mode": "IMMEDIATE"})
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # psycopg prepares the app's batch statement for posts after 5 runs on a
    # connection, and PostgreSQL stops parsing and planning it every time
    # (about a third of the time it took, docs/PERFORMANCE.md). Django's own queries bind on
    # the client and are never prepared. Off (DB_PREPARED_STATEMENTS=0) behind
    # a pooler in transaction mode that does not carry prepared statements
    # across server connections (PgBouncer before 1.21).
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "prepare_threshold", 5 if env.bool("DB_PREPARED_STATEMENTS", default=True) else None
    )

REDIS_URL = env.str("REDIS_URL", default="")
# REDIS_URL names a node of a Redis Cluster (MESSAGING_REDIS_CLUSTER=1): the
# app's own parts speak cluster; channels-redis and django-redis do not, and
# the app needs neither (its hub carries the live frames), so they stay local.
REDIS_CLUSTER = env.bool("MESSAGING_REDIS_CLUSTER", default=False)

if REDIS_URL and not REDIS_CLUSTER:
    # `CHANNEL_LAYER=pubsub` picks channels-redis' Pub/Sub layer, measured in
    # docs/PERFORMANCE.md: 2.5x the fan-out frames. Not the default: Redis
    # Pub/Sub ignores the db number (apps sharing a server hear each other),
    # and a socket can get a live frame published just before it joined.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": {
                "redis": "channels_redis.core.RedisChannelLayer",
                "pubsub": "channels_redis.pubsub.RedisPubSubChannelLayer",
            }[env.str("CHANNEL_LAYER", default="redis")],
            "CONFIG": {
                # redis-py 8 defaults to a 5 s socket timeout, the same as the
                # layer's blocking poll: without None consumers die with 1011.
                "hosts": [{"address": REDIS_URL, "socket_timeout": None}],
            },
        },
    }
    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": REDIS_URL,
        },
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# channels-redis is optional (the app's `redis-layer` extra): the chat needs no
# channel layer, only a consumer that names one (the bench's comparison
# consumer, a host's own) talks across processes through it. Without it the
# layer is the in-memory one, within each process.
if importlib.util.find_spec("channels_redis") is None:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

MESSAGING = {
    # The dedup window lives in Redis when there is one; without Redis the
    # database alone keeps the exactly-once guarantee.
    "REDIS_URL": REDIS_URL or None,
    # Where messaging_relay publishes the events: unset, the Redis stream on
    # REDIS_URL; nats://HOST:PORT for NATS JetStream (docs/EVENTS.md).
    "EVENTS_URL": env.str("EVENTS_URL", default="") or None,
    # Commands run on a pool of threads with a connection each, not on
    # channels' single database thread: 1.4x the acks/s (docs/PERFORMANCE.md).
    "DB_THREADS": 4,
    # /metrics answers only scrapers that send this bearer token; unset, it is off.
    "METRICS_TOKEN": env.str("METRICS_TOKEN", default="") or None,
    # WebSocket handshakes per client address per minute (0: off), as PROTOCOL.md names it.
    "CONNECT_RATE": env.int("CONNECT_RATE", default=120),
    # Webhook endpoints on loopback, private or link-local addresses (1: allowed), as PROTOCOL.md names it.
    "WEBHOOKS_ALLOW_PRIVATE": env.bool("WEBHOOKS_ALLOW_PRIVATE", default=False),
    # Mention e-mails one user gets in any hour; past it they wait for one digest, as PROTOCOL.md names it.
    "MENTION_EMAILS_PER_HOUR": env.int("MENTION_EMAILS_PER_HOUR", default=10),
    # The reverse proxies whose X-Forwarded-For names the client (PROTOCOL.md 1.2):
    # comma-separated addresses or CIDR blocks; unset, every peer is the client.
    "TRUSTED_PROXIES": env.str("TRUSTED_PROXIES", default=""),
    # The largest upload, in bytes (413 past it), as PROTOCOL.md names it: 10 MiB unless set.
    "MAX_UPLOAD_BYTES": env.int("MAX_UPLOAD_BYTES", default=10 * 1024 * 1024),
    # Content types uploads may have beside the protocol's six (comma-separated; 415 for others).
    "UPLOAD_TYPES": env.str("UPLOAD_TYPES", default=""),
    # Any other option as MESSAGING_<KEY>, e.g. MESSAGING_CLAIM_LEASE=2.
    **options_from_environ(env.ENVIRON),
}
# Checked now, so that a malformed entry stops the server at start rather
# than failing its first request (`manage.py check` says so too: messaging.E001).
trusted_proxies(MESSAGING["TRUSTED_PROXIES"])

# Where e-mails go (the mentions consumer's), as PROTOCOL.md names it: the forms
# of django-environ's EMAIL_URL, e.g. smtp+tls://user:password@host:587,
# smtp+ssl://host:465, filemail:///folder (relative to the working directory;
# filemail:////var/mail/chat for an absolute one), consolemail://. Unset: an
# SMTP server on localhost:25, Django's own default. EMAIL_TIMEOUT bounds each
# SMTP call, so a server that hangs cannot hold the consumer.
globals().update(
    {
        key: value
        for key, value in env.email_url("EMAIL_URL", default="smtp://localhost:25").items()
        if key.startswith("EMAIL_")
    }
)
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=10)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="webmaster@localhost")

# Guest sign-ins per client address per SIGNIN_RATE_WINDOW seconds (0: off):
# past it `/login/` answers 429 and creates no account (project/guests.py).
SIGNIN_RATE = env.int("SIGNIN_RATE", default=30)
SIGNIN_RATE_WINDOW = env.float("SIGNIN_RATE_WINDOW", default=60.0)

# Failed password logins (the admin's) from one client address that lock it
# out: that failure and every attempt after it get 429 until
# ADMIN_LOCKOUT_SECONDS have passed since the last (django-axes; 0: off). The
# address is the app's own reading of it (messaging.client_ip_of_request:
# TRUSTED_PROXIES and X-Forwarded-For), so a rotating header from an
# untrusted peer does not make a new address. Attempts are kept in the
# database (every process sees them); `manage.py axes_reset_ip ADDRESS` unlocks one.
ADMIN_LOGIN_FAILURES = env.int("ADMIN_LOGIN_FAILURES", default=5)
AXES_ENABLED = ADMIN_LOGIN_FAILURES > 0
AXES_FAILURE_LIMIT = max(1, ADMIN_LOGIN_FAILURES)
AXES_COOLOFF_TIME = timedelta(seconds=env.int("ADMIN_LOCKOUT_SECONDS", default=900))
AXES_LOCKOUT_PARAMETERS = ["ip_address"]
AXES_CLIENT_IP_CALLABLE = "messaging.client_ip_of_request"
AXES_RESET_ON_SUCCESS = True

AUTH_PASSWORD_VALIDATORS: list[dict[str, Any]] = []
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
# Uploaded files (POST /api/uploads) are kept in the default storage, under
# MEDIA_ROOT/messaging/uploads/; the app serves them to those who may have
# them, never the web server (docs/OPERATIONS.md, "Files").
MEDIA_ROOT = env.path("MEDIA_ROOT", default=BASE_DIR / "media")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage",
    },
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Every line made while a command runs names its id, type and user.
    "filters": {"command": {"()": "messaging.ops.logcontext.CommandContextFilter"}},
    "formatters": {
        "plain": {
            "format": "%(asctime)s %(levelname)s %(name)s [%(command_id)s %(command_type)s user=%(user)s] %(message)s"
        },
        "json": {"()": "messaging.ops.logcontext.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": env.str("LOG_FORMAT", default="plain"),
            "filters": ["command"],
        }
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
}
