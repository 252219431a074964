"""gunicorn serving the app with uvicorn's workers (the `uvicorn-worker` package).

    gunicorn -c deploy/gunicorn.conf.py project.asgi:application

gunicorn supervises the worker processes (restarts a dead one, reloads on
SIGHUP, stops gracefully on SIGTERM); each worker is one uvicorn event loop.
Every worker holds its own sockets and its own connections to PostgreSQL and
Redis, and reaches the others' sockets through Redis (docs/OPERATIONS.md):
one worker per core is the usual start. Settings come from the environment
(`GUNICORN_BIND`, `GUNICORN_WORKERS`) so that the systemd unit and the tests
set them without editing this file.
"""

import multiprocessing
import os

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", multiprocessing.cpu_count()))
# uvicorn's worker with the WebSocket options of docs/OPERATIONS.md.
worker_class = "project.workers.Worker"
# A worker that stops answering gunicorn's heartbeat this long is restarted.
timeout = 30
# On SIGTERM, sockets get this long to close before the workers are killed.
graceful_timeout = 20
# Behind nginx on the same host: the app reads X-Forwarded-For itself, from
# TRUSTED_PROXIES (docs/OPERATIONS.md), so gunicorn's and uvicorn's own
# forwarded-header handling stays off.
forwarded_allow_ips = ""
accesslog = "-"
errorlog = "-"
