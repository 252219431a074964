"""Test-wide defaults, loaded as a plugin (`-p tests.environment`) before Django:
the suite runs on real PostgreSQL and Redis.

`make test` sets these too; the defaults here make a bare `pytest` do the same.
Give each parallel checkout its own database name and Redis db number.
"""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/messaging")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
# The demo's settings default to DEBUG off, which needs a SECRET_KEY and the
# collected static files' manifest. In-process tests render pages from the
# source tree like `make run`; the server processes they start set DEBUG=0.
os.environ.setdefault("DEBUG", "1")
