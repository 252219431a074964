"""Test-wide defaults, loaded as a plugin (`-p tests.environment`) before Django:
the suite runs on real PostgreSQL and Redis.

`make test` sets these too; the defaults here make a bare `pytest` do the same.
Give each parallel checkout its own database name and Redis db number.
"""
import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/messaging")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
