"""The demo project's settings are safe by default: DEBUG off unless set, a
SECRET_KEY required without it, and with HTTPS=1 a configuration that
`check --deploy` passes without a warning.

Each case imports the settings in a process of its own, from an environment
built here: the suite's own (DEBUG=1, tests/environment.py) must not leak in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.servers import ROOT

# What these tests set themselves; anything else (PATH, the test database) is inherited.
OWN = (
    "DEBUG",
    "SECRET_KEY",
    "HTTPS",
    "SECURE_SSL_REDIRECT",
    "SECURE_COOKIES",
    "HSTS_SECONDS",
    "HSTS_INCLUDE_SUBDOMAINS",
    "HSTS_PRELOAD",
    "PROXY_SSL_HEADER",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "TRUSTED_PROXIES",
    "MESSAGING_TRUSTED_PROXIES",
)
STRONG_KEY = "k3y-" + "x8Yq2Lm0Zr7Tn4Wc9Vb1Pd6Hs5Jf3Gk8" * 2
PRODUCTION = {"DEBUG": "0", "HTTPS": "1", "SECRET_KEY": STRONG_KEY, "ALLOWED_HOSTS": "chat.example.com"}


def environment(**given: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OWN}
    return {**env, "DJANGO_SETTINGS_MODULE": "project.settings", **given}


def settings_of(*names: str, **given: str) -> dict:
    probe = (
        "import json, django; from django.conf import settings; django.setup(); "
        f"print(json.dumps({{n: getattr(settings, n, None) for n in {list(names)!r}}}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=environment(**given), capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def manage(*args: str, **given: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=environment(**given), capture_output=True, text=True
    )


def test_debug_is_off_unless_set():
    assert settings_of("DEBUG", SECRET_KEY=STRONG_KEY) == {"DEBUG": False}
    assert settings_of("DEBUG", DEBUG="1") == {"DEBUG": True}


def test_without_debug_a_secret_key_is_required_and_the_error_names_it():
    failed = manage("check")
    assert failed.returncode != 0
    assert "Set the SECRET_KEY environment variable" in failed.stderr, failed.stderr[-2000:]
    # The development key is only ever used with DEBUG on.
    assert settings_of("SECRET_KEY", DEBUG="1") == {"SECRET_KEY": "insecure-dev-key-change-me"}


def test_plain_http_by_default_so_the_suites_servers_and_the_demo_keep_working():
    assert settings_of(
        "SECURE_SSL_REDIRECT",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_HSTS_SECONDS",
        "SECURE_PROXY_SSL_HEADER",
        SECRET_KEY=STRONG_KEY,
    ) == {
        "SECURE_SSL_REDIRECT": False,
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SECURE_HSTS_SECONDS": 0,
        "SECURE_PROXY_SSL_HEADER": None,
    }


def test_https_turns_on_redirect_secure_cookies_and_hsts_each_overridable():
    names = (
        "SECURE_SSL_REDIRECT",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_HSTS_SECONDS",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        "SECURE_HSTS_PRELOAD",
    )
    assert settings_of(*names, **PRODUCTION) == {
        "SECURE_SSL_REDIRECT": True,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_HSTS_SECONDS": 31536000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_HSTS_PRELOAD": True,
    }
    overridden = {
        "SECURE_SSL_REDIRECT": "0",
        "HSTS_SECONDS": "300",
        "HSTS_INCLUDE_SUBDOMAINS": "0",
        "HSTS_PRELOAD": "0",
    }
    assert settings_of(*names, **PRODUCTION, **overridden) == {
        "SECURE_SSL_REDIRECT": False,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_HSTS_SECONDS": 300,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": False,
        "SECURE_HSTS_PRELOAD": False,
    }


def test_the_proxys_header_is_named_as_the_proxy_sends_it():
    given = settings_of("SECURE_PROXY_SSL_HEADER", **PRODUCTION, PROXY_SSL_HEADER="X-Forwarded-Proto")
    assert given == {"SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"]}


def test_check_deploy_is_clean_with_production_settings():
    checked = manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # A long garbage collection on a busy machine is logged too (messaging.ops.loopwatch): not a check's warning.
    warnings = [
        line for line in checked.stderr.splitlines() if "WARNING" in line and "messaging.ops.loopwatch" not in line
    ]
    assert "no issues" in checked.stdout and not warnings, checked.stdout + checked.stderr


def test_a_malformed_trusted_proxy_stops_the_start_and_names_the_entry():
    for variable, value in [("TRUSTED_PROXIES", "10.0.0.0/8,nginx"), ("MESSAGING_TRUSTED_PROXIES", "10.0.0.7/8")]:
        failed = manage("check", DEBUG="1", **{variable: value})
        assert failed.returncode != 0
        assert "ImproperlyConfigured: TRUSTED_PROXIES" in failed.stderr, failed.stderr[-2000:]
    assert manage("check", DEBUG="1", TRUSTED_PROXIES="10.0.0.0/8, fd00::/8").returncode == 0
