"""The bench's configs and targets (bench/configs.py, bench/targets.py): which server a config runs on,
and the target across servers, measured in one uvicorn run beside daphne's echo."""

from __future__ import annotations

from bench.configs import DAPHNE_ECHO, default_configs, server_env, server_of
from bench.targets import targets


def peak(**acks: float) -> dict:
    return {config: {"acks_per_s": value} for config, value in acks.items()}


def test_a_config_runs_on_its_own_server_else_the_runs():
    assert server_of("full", "uvicorn") == "uvicorn"
    assert server_of(DAPHNE_ECHO, "uvicorn") == "daphne"
    assert server_of("full+EARLY_STATEMENT=0+SERVER=uvicorn", "daphne") == "uvicorn"


def test_the_server_lever_is_not_the_servers_environment():
    env = server_env("echo+SERVER=daphne+BATCH_SETTLE=1", {"DEBUG": "0"}, {"LEVER": "1"})
    assert env == {"DEBUG": "0", "LEVER": "1", "BATCH_SETTLE": "1"}


def test_a_uvicorn_run_measures_daphnes_echo_beside_its_own():
    assert DAPHNE_ECHO in default_configs("uvicorn").split(",")
    assert DAPHNE_ECHO not in default_configs("daphne").split(",")


def test_full_on_uvicorn_is_held_against_echo_on_daphne():
    found = targets(peak(full=5000, echo=9000, **{DAPHNE_ECHO: 5500}), {}, None, server="uvicorn")
    assert found["full (uvicorn) / echo on daphne >= 1"] == {"value": 0.91, "met": False}
    assert found["full / echo >= 0.6 (uvicorn)"] == {"value": 0.56, "met": False}
    found = targets(peak(full=6000, echo=9000, **{DAPHNE_ECHO: 5500}), {}, None, server="uvicorn")
    assert found["full (uvicorn) / echo on daphne >= 1"] == {"value": 1.09, "met": True}


def test_without_daphnes_echo_the_target_across_servers_is_not_measured():
    found = targets(peak(full=5000, echo=9000), {}, None, server="uvicorn")
    assert found["full (uvicorn) / echo on daphne >= 1"] == {"value": None, "met": None}
    assert "full (uvicorn) / echo on daphne >= 1" not in targets(peak(full=5000, echo=6000), {}, None)
