"""The package is importable before Django is configured, as a host's settings module may need it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_import_needs_no_settings_and_command_is_the_registry_decorator():
    proc = run(
        """
        import messaging
        assert messaging.__version__
        import django
        from django.conf import settings
        settings.configure(INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "messaging"])
        django.setup()
        from messaging.core import handlers
        assert messaging.command is handlers.command

        @messaging.command("test.lazy", exactly_once=False)
        def lazy(ctx, data):
            return {}

        assert handlers.lookup("test.lazy").exactly_once is False
        print("ok")
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_unknown_attribute_is_an_attribute_error():
    proc = run("import messaging\ntry:\n    messaging.nope\nexcept AttributeError as e:\n    print(e)\n")
    assert proc.stdout.strip() == "module 'messaging' has no attribute 'nope'"


def test_public_names_and_the_module_paths_of_0_2_are_the_moved_modules():
    proc = run(
        """
        import messaging
        import django
        from django.conf import settings
        settings.configure(INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "messaging"])
        django.setup()
        from messaging.exceptions import Invalid
        from messaging.routing import websocket_urlpatterns
        import messaging.core.exceptions, messaging.transport.routing, messaging.handlers, messaging.core.handlers
        assert messaging.Invalid is Invalid is messaging.core.exceptions.Invalid
        assert messaging.websocket_urlpatterns is websocket_urlpatterns is messaging.transport.routing.websocket_urlpatterns
        # One registry, whichever path a host imported it by.
        assert messaging.handlers is messaging.core.handlers
        import logging.config
        logging.config.dictConfig({"version": 1, "filters": {"c": {"()": "messaging.logcontext.CommandContextFilter"}}})
        try:
            import messaging.idempotency
        except ModuleNotFoundError:
            print("ok")
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
