"""What the packaging tests share: a folder of wheels that outlives the run (tests/support/venvs.py), and the
app's wheel, a fresh environment with it and the host project that uses it, each made once per session."""

from __future__ import annotations

import shutil
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support.hostproject import HOST, host_env, migrate, postgres_database, uuid_users_env
from tests.support.servers import ROOT, RedisServer
from tests.support.venvs import Wheelhouse, run


@pytest.fixture(scope="session")
def wheelhouse(request) -> Wheelhouse:
    """Wheels downloaded once (into .pytest_cache; `make clean` empties it) for fresh environments to install from."""
    return Wheelhouse(request.config.cache.mkdir("wheelhouse"))


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "CHANGELOG.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "messaging", src / "messaging", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp_path_factory.mktemp("dist")
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
def venv(wheel, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", root)
    python = root / "bin" / "python"
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    Path(purelib, "_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(python, "-m", "pip", "install", "--quiet", "--no-index", "--disable-pip-version-check", wheel)
    return root


@pytest.fixture(scope="session")
def host(venv, tmp_path_factory):
    """The host project, migrated, with its own Redis; yields (python, project dir, environment)."""
    project = tmp_path_factory.mktemp("host")
    shutil.copytree(HOST, project, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    redis_server = RedisServer(tmp_path_factory.mktemp("redis"))
    redis_server.start()
    env = host_env(redis_server.url, HOST_DATABASE=str(project / "db.sqlite3"))
    python = venv / "bin" / "python"
    migrate(python, project, env)
    yield python, project, env
    redis_server.stop()


@pytest.fixture(scope="session")
def uuid_host(host):
    """The host project on PostgreSQL with a user model keyed by UUID, on a database of its own."""
    python, project, env = host
    with postgres_database("host_uuid") as database_url:
        env = uuid_users_env(env, database_url)
        migrate(python, project, env)
        yield python, project, env
