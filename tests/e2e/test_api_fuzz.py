"""Schemathesis, from the served OpenAPI document, against a live daphne: no 5xx, answers as documented.

The fuzzer runs as its command line does (`schemathesis run`), with an API
token and without one: every phase (the document's examples, coverage of
its constraints, then random and invalid requests), every check but one.
`positive_data_acceptance` is left out: a body valid for the document can
still be refused by the command type's own rules (a room that is no slug, a
post without a key), which the document cannot spell out.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from messaging.transport.tokens import create_token

pytestmark = [pytest.mark.e2e]


def run_schemathesis(url: str, cwd, *extra: str) -> subprocess.CompletedProcess:
    # Its own folder: the command line keeps a database of examples where it runs.
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "run",
            url + "/api/openapi.json",
            "--max-examples",
            "150",
            "--exclude-checks",
            "positive_data_acceptance",
            "--no-color",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )


async def test_the_api_answers_as_documented_and_never_with_a_5xx(start_daphne, tmp_path):
    server = start_daphne(MESSAGING_RATE_BURST="1000000", MESSAGING_USER_RATE_LIMIT="1000000")
    user = await sync_to_async(get_user_model().objects.create_user)(username="fuzzer")
    _, token = await sync_to_async(create_token)(user, "fuzz")
    for extra in (("--header", f"Authorization: Bearer {token}"), ()):
        run = await sync_to_async(run_schemathesis)(server.url, tmp_path, *extra)
        assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:] + server.log()
        assert re.search(r"\d+ generated, \d+ passed", run.stdout), run.stdout[-3000:]
    assert "Internal Server Error" not in server.log() and "Traceback" not in server.log()
