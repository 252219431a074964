"""The Python client as a bot's author installs it: the wheel of clients/python and its one
dependency in a fresh virtual environment, with nothing of the server (no Django, Channels,
daphne, psycopg or Redis), from which examples/bot.py answers on a real daphne.

The environment installs with `--no-index` from the wheelhouse (tests/support/venvs.py):
the client's wheel, built here from a clean copy of its sources, and websockets at the
lowest version the client declares, downloaded from PyPI once, so the floor is what runs.
"""

from __future__ import annotations

import asyncio
import email
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from messaging_client import Client, asign_in
from tests.support.servers import ROOT
from tests.support.venvs import fresh_venv, installed, run

CLIENT = ROOT / "clients" / "python"
# What only the server needs: none of it may come with the client.
SERVER_SIDE = {
    "django",
    "channels",
    "channels-redis",
    "daphne",
    "psycopg",
    "psycopg-binary",
    "redis",
    "hiredis",
    "django-messaging-exactly-once",
    "asgiref",
    "twisted",
}


def metadata(wheel: Path) -> email.message.Message:
    archive = zipfile.ZipFile(wheel)
    return email.message_from_bytes(
        archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA")))
    )


@pytest.fixture(scope="session")
def client_wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("client-src")
    shutil.copytree(
        CLIENT,
        src,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "tests"),
    )
    dist = tmp_path_factory.mktemp("client-dist")
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        dist,
        src,
    )
    [built] = dist.glob("*.whl")
    return built


@pytest.fixture(scope="session")
def client_python(client_wheel, wheelhouse, tmp_path_factory) -> Path:
    """The python of a fresh environment with `pip install messaging-client` in it, and nothing else."""
    python = fresh_venv(tmp_path_factory.mktemp("client-venv"))
    [floor] = [Requirement(r) for r in metadata(client_wheel).get_all("Requires-Dist")]
    [lowest] = [s.version for s in floor.specifier if s.operator == ">="]
    wheelhouse.install(python, client_wheel, pins={floor.name: lowest})
    return python


def test_the_wheel_declares_websockets_only_and_ships_its_types_and_licence(client_wheel):
    info = metadata(client_wheel)
    assert info["Name"] == "messaging-client" and info["Version"] == "0.3.0"
    assert [Requirement(r).name for r in info.get_all("Requires-Dist")] == ["websockets"]
    assert info["License-Expression"] == "BSD-3-Clause"
    shipped = set(zipfile.ZipFile(client_wheel).namelist())
    assert {"messaging_client/py.typed", "messaging_client/ids.py"} <= shipped
    [licence] = [n for n in shipped if n.endswith(".dist-info/licenses/LICENSE")]
    assert zipfile.ZipFile(client_wheel).read(licence) == (ROOT / "LICENSE").read_bytes()  # the repository's own
    tracked = run("git", "ls-files", "clients/python/src", cwd=ROOT).split()
    assert [f for f in tracked if f.removeprefix("clients/python/src/") not in shipped] == []


def test_the_client_installs_alone_without_anything_of_the_server(client_python):
    packages = installed(client_python)
    assert packages - {"pip", "setuptools"} == {"messaging-client", "websockets"}
    assert packages & SERVER_SIDE == set()
    # Nor does the repository's app leak in: a bot has only the client.
    code = "import messaging_client, importlib.util as u; print(messaging_client.__version__, u.find_spec('messaging'))"
    assert run(client_python, "-c", code, cwd=client_python.parents[1]).split() == ["0.3.0", "None"]


async def test_the_example_bot_runs_from_it_and_answers(client_python, start_daphne, tmp_path):
    server = start_daphne()
    bot = subprocess.Popen(
        [client_python, ROOT / "examples" / "bot.py", server.url, "--room", "lobby", "--state", tmp_path / "bot"],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"]},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    ana = Client(server.url, session=await asign_in(server.url, "ana"))
    try:
        await ana.start()
        await ana.join("lobby")
        await ana.post("lobby", "!echo from a venv of its own")

        async def answered() -> dict:
            while True:
                for message in ana.messages("lobby"):
                    if message["body"] == "from a venv of its own":
                        return message
                if bot.poll() is not None:
                    raise AssertionError(f"the bot exited with {bot.returncode}:\n{bot.stdout.read()[-3000:]}")
                await asyncio.sleep(0.05)

        answer = await asyncio.wait_for(answered(), 60)
        assert answer["sender"]["name"] == "echo-bot"
    finally:
        await ana.close()
        bot.kill()
        bot.wait()
