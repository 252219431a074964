"""System checks: each misconfiguration gets its id, and a sound configuration gets none."""

from __future__ import annotations

import pytest
from django.core import checks

from messaging.ops import checks as messaging_checks

REDIS_LAYER = "channels_redis.core.RedisChannelLayer"


def ids() -> list[str]:
    return sorted(m.id for m in checks.run_checks(tags=[messaging_checks.TAG]))


@pytest.fixture
def sound(settings, tmp_path):
    """A production-like configuration that passes every check."""
    settings.DEBUG = False
    settings.MESSAGING = {"REDIS_URL": "redis://127.0.0.1:6379/7"}
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": REDIS_LAYER,
            "CONFIG": {"hosts": [{"address": "redis://r:6379/0", "socket_timeout": None}]},
        }
    }
    settings.CACHES = {"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": "redis://r:6379/1"}}
    assert settings.DATABASES["default"]["CONN_MAX_AGE"] > 0
    return settings


def test_a_sound_configuration_passes(sound, monkeypatch):
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    assert ids() == []


def test_unknown_messaging_keys(sound):
    sound.MESSAGING = {"DEDUP_WINDOWS": 10}
    [message] = checks.run_checks(tags=[messaging_checks.TAG])
    assert message.id == "messaging.E001" and "DEDUP_WINDOWS" in message.msg


def test_fanout_without_redis_with_debug_off(sound):
    # Room fan-out goes through the app's own Redis (messaging/transport/fanout.py), not
    # the channel layer: without it live frames stay in their process.
    sound.MESSAGING = {}
    assert ids() == ["messaging.W001"]
    sound.DEBUG = True
    assert ids() == []


def test_in_memory_channel_layer_is_not_a_fanout_problem(sound):
    sound.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    assert ids() == []


@pytest.mark.parametrize(
    "hosts",
    [
        ["redis://r:6379/0"],  # redis-py's default timeout: 5 s
        [("r", 6379)],
        [{"address": "redis://r:6379/0"}],
        [{"address": "redis://r:6379/0", "socket_timeout": 5}],
        [{"address": "redis://r:6379/0?socket_timeout=3"}],
        [{"master_name": "mymaster", "sentinels": [("s", 26379)]}],
        None,
    ],
)
def test_layer_socket_timeout_that_can_fire_during_the_poll(sound, hosts):
    sound.CHANNEL_LAYERS = {"default": {"BACKEND": REDIS_LAYER, "CONFIG": {"hosts": hosts} if hosts else {}}}
    assert ids() == ["messaging.E002"]


@pytest.mark.parametrize(
    "host",
    [
        {"address": "redis://r:6379/0", "socket_timeout": None},
        {"address": "redis://r:6379/0", "socket_timeout": 30},
        {"address": "redis://r:6379/0?socket_timeout=30"},
    ],
)
def test_layer_socket_timeout_longer_than_the_poll_passes(sound, host):
    sound.CHANNEL_LAYERS = {"default": {"BACKEND": REDIS_LAYER, "CONFIG": {"hosts": [host]}}}
    assert ids() == []


def test_cache_that_swallows_errors(sound):
    sound.CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": "redis://r/1",
            "OPTIONS": {"IGNORE_EXCEPTIONS": True},
        }
    }
    assert ids() == ["messaging.W002"]
    sound.CACHES = {"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": "redis://r/1"}}
    sound.DJANGO_REDIS_IGNORE_EXCEPTIONS = True
    assert ids() == ["messaging.W002"]


def test_conn_max_age_zero(sound, monkeypatch):
    # Edited in place and put back by monkeypatch: overriding DATABASES whole
    # would rebuild nothing and warn; the check only reads the dicts.
    monkeypatch.setitem(sound.DATABASES, "sqlite", {"ENGINE": "django.db.backends.sqlite3", "CONN_MAX_AGE": 0})
    assert ids() == [], "SQLite has no connection to set up"
    monkeypatch.setitem(sound.DATABASES["default"], "CONN_MAX_AGE", 0)
    assert ids() == ["messaging.W003"]


def test_metrics_directory_must_exist(sound, monkeypatch, tmp_path):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "missing"))
    assert ids() == ["messaging.E003"]
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    assert ids() == []
