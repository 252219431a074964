"""messaging.testing's `ServerProcess`: a real daphne or uvicorn process of an ASGI app."""

from __future__ import annotations

import os

import pytest

from messaging.testing import ServerProcess

from ..support.servers import ROOT

pytestmark = [pytest.mark.e2e]


@pytest.mark.parametrize("kind", ["daphne", "uvicorn", "gunicorn"])
def test_it_serves_the_app_until_stopped(kind, server_env, tmp_path):
    server = ServerProcess(kind, env={**os.environ, **server_env}, log_dir=tmp_path, cwd=ROOT).start()
    try:
        status, headers, body = server.request("GET", "/healthz")
        assert status == 200 and headers["content-type"].startswith("application/json"), (status, body)
        process = server.process
    finally:
        server.stop()
    assert process.poll() is not None and server.process is None, "stopped, and waited for"
    server.stop()  # again: nothing to do


def test_an_app_that_does_not_start_is_an_error_with_its_log(tmp_path):
    server = ServerProcess("daphne", "no_such_module:application", log_dir=tmp_path, cwd=ROOT)
    with pytest.raises(RuntimeError, match="daphne exited") as raised:
        server.start()
    assert "no_such_module" in str(raised.value), "the server's own words say why"


def test_a_server_it_does_not_know_is_refused():
    with pytest.raises(ValueError, match="hypercorn"):
        ServerProcess("hypercorn")
