"""The bench's configurations: a kind of consumer, and the levers riding on it.

A config is "full", "echo" or "tutorial", optionally with levers:
"full+CHANNEL_LAYER=pubsub" (the server's environment), "full+IDS=random"
(the load generator's command ids), "echo+SERVER=daphne" (the server of
this config, whatever --server says). The idle check's "floor" is the
server alone, with an app that only accepts sockets (bench/floor.py).
"""

from __future__ import annotations

# Not a config of the load rounds: the idle check's server alone, serving bench/floor.py instead of bench.asgi.
FLOOR = "floor"
APPS = {FLOOR: "bench.floor:application"}
APP = "bench.asgi:application"


def kind_of(config: str) -> str:
    """A config is a kind ("full", "echo", "tutorial"), optionally with levers: "full+CHANNEL_LAYER=pubsub"."""
    return config.split("+", 1)[0]


# A lever of the load generator, not of the server: "full+IDS=random" sends
# random (uuid4) command ids instead of time-ordered ones.
IDS_LEVER, RANDOM_IDS = "IDS", "random"
# A lever of the bench: "echo+SERVER=daphne" serves that config with daphne
# whatever --server says, so that a target across servers (full on uvicorn
# against echo on daphne) is measured in one run, its rounds interleaved.
SERVER_LEVER = "SERVER"
# The echo consumer on daphne, beside a uvicorn run's configs.
DAPHNE_ECHO = "echo+SERVER=daphne"


def default_configs(server: str) -> str:
    return "full,echo,tutorial" if server == "daphne" else f"full,echo,{DAPHNE_ECHO},tutorial"


def levers_of(config: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in config.split("+")[1:])


def server_of(config: str, default: str) -> str:
    """The server a config runs on: its SERVER= lever, else `default` (--server)."""
    return levers_of(config).get(SERVER_LEVER, default)


def server_env(config: str, base: dict[str, str], levers: dict[str, str]) -> dict[str, str]:
    if config == "tutorial":
        # Django's defaults, as a tutorial leaves them: a connection per request.
        return {**base, "CONN_MAX_AGE": "0"}
    own = {key: value for key, value in levers_of(config).items() if key != SERVER_LEVER}
    return {**base, **levers, **own}
