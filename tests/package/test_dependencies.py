"""The app's hard requirements are what it imports, and the demo project's are an extra of their own.

The wheel (test_wheel.py builds it) goes into a fresh virtual environment with
its hard requirements and nothing else (from the wheelhouse,
tests/support/venvs.py). There a host project's start (settings, apps, every
public name, the URLs and the ASGI application, system checks, migrations)
runs, and loads each hard requirement: none is there for nothing, and
nothing optional is needed.
"""

from __future__ import annotations

import ast
import email
import importlib.metadata
import json
import re
import tomllib
import zipfile

from packaging.requirements import Requirement

from tests.support.servers import ROOT
from tests.support.venvs import fresh_venv, installed, run

# What only some hosts, one server, one database or the demo want: extras, never hard requirements.
OPTIONAL = {
    "channels-redis",
    "msgpack",
    "daphne",
    "twisted",
    "autobahn",
    "psycopg",
    "psycopg-binary",
    "websockets",
    "messaging-client",
    "django-csp",
    "nats-py",
    "django-environ",
    "whitenoise",
    "django-redis",
    "httpx",
}

HOST_URLS = """from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("messaging.contrib.chat.urls")),
    path("", include("messaging.urls")),
]
"""

# A host project's start, as docs/INTEGRATION.md lays it out, minimally configured; then which
# distributions its process loaded.
HOST_START = """
import importlib.metadata, json, sys
import django
from django.conf import settings

settings.configure(
    SECRET_KEY="a-host-project-of-the-dependency-test", ALLOWED_HOSTS=["127.0.0.1"], USE_TZ=True,
    INSTALLED_APPS=["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                    "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles",
                    "channels", "messaging", "messaging.contrib.chat", "messaging.contrib.reactions"],
    MIDDLEWARE=["django.contrib.sessions.middleware.SessionMiddleware", "django.middleware.csrf.CsrfViewMiddleware",
                "django.contrib.auth.middleware.AuthenticationMiddleware",
                "django.contrib.messages.middleware.MessageMiddleware"],
    TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
                "OPTIONS": {"context_processors": ["django.template.context_processors.request",
                                                   "django.contrib.auth.context_processors.auth",
                                                   "django.contrib.messages.context_processors.messages"]}}],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    ROOT_URLCONF="hosturls", STATIC_URL="static/", LOGIN_URL="/login/",
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
)
django.setup()

import messaging
from channels.routing import ProtocolTypeRouter, URLRouter
from django.core.asgi import get_asgi_application
from django.core.management import call_command
from django.urls import resolve

for name in messaging.__all__:
    getattr(messaging, name)
messaging.allow_protocol_close_codes()
messaging.defer_autobahn_log_formatting()
messaging.sweep_only_due_connections()
messaging.ring_uvicorn_pings_on_a_wheel()
application = ProtocolTypeRouter({"http": get_asgi_application(),
                                  "websocket": messaging.SocketGate(URLRouter(messaging.websocket_urlpatterns))})
resolve("/healthz")
call_command("check", fail_level="ERROR")
call_command("migrate", verbosity=0)

distributions = importlib.metadata.packages_distributions()
loaded = {d.lower().replace("_", "-") for m in {n.split(".")[0] for n in sys.modules} for d in distributions.get(m, [])}
print(json.dumps(sorted(loaded)))
"""


def requirement_names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower().replace("_", "-") for r in requirements}


def test_the_app_runs_on_its_hard_requirements_alone_and_loads_each(wheel, wheelhouse, tmp_path):  # noqa: F811
    archive = zipfile.ZipFile(wheel)
    info = email.message_from_bytes(archive.read(next(n for n in archive.namelist() if n.endswith("/METADATA"))))
    hard = requirement_names([r for r in info.get_all("Requires-Dist") if "extra ==" not in r])
    assert hard & OPTIONAL == set()

    python = fresh_venv(tmp_path / "venv")
    wheelhouse.install(python, wheel)
    assert installed(python) & OPTIONAL == set()

    host = tmp_path / "host"
    host.mkdir()
    (host / "hosturls.py").write_text(HOST_URLS)
    loaded = set(json.loads(run(python, "-c", HOST_START, cwd=host, env={"PATH": "/usr/bin:/bin"})))
    assert hard - loaded == set(), f"hard requirements a host's start never loads: {sorted(hard - loaded)}"


def demo_modules() -> set[str]:
    """The top-level modules the demo project imports, or names in its settings (middleware, backends, apps)."""
    modules = set()
    for path in (ROOT / "project").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and re.fullmatch(r"[a-z_]+(\.\w+)*", node.value)
            ):
                modules.add(node.value.split(".")[0])
    return modules


def test_the_demo_extra_holds_what_the_demo_project_uses_and_its_lock_pins_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    own = project["name"]

    def expanded(requirements: list[str]) -> set[str]:
        names = set()
        for text in requirements:
            requirement = Requirement(text)
            if requirement.name == own:  # the app's own extras, named from another
                names |= set().union(*(expanded(extras[extra]) for extra in requirement.extras))
            else:
                names.add(requirement.name.lower().replace("_", "-"))
        return names

    demo = expanded(extras["demo"])
    distributions = importlib.metadata.packages_distributions()
    used = {d.lower().replace("_", "-") for m in demo_modules() for d in distributions.get(m, [])}
    # Its settings use channels-redis only if it is installed (tests/e2e/test_demo_without_channels_redis.py).
    allowed = demo | requirement_names(project["dependencies"]) | expanded(extras["redis-layer"]) | {own}
    assert used - allowed == set()
    assert {"django-environ", "whitenoise", "django-redis", "django-csp", "daphne", "psycopg"} <= demo
    # What `make run` and a deployment of the demo install: requirements.txt's pins and what comes with them.
    locked = set(re.findall(r"^([A-Za-z0-9._-]+)==", (ROOT / "requirements.lock").read_text(), re.MULTILINE))
    assert demo - {name.lower().replace("_", "-") for name in locked} == set()
