"""Two federated deployments for tests: each its own database, redis-server and daphne processes, a fault proxy between them.

    pair = Pair(base_url, directory, static_root).start()
    pair.a.url, pair.b.url            # each deployment's first server
    pair.a.inbound.refuse(5)          # b's requests to a refused for 5 s
    pair.stop(); pair.drop()

The databases are named after the base database (databases.py): a template
migrated once (`<base>_peer_template`), copied for each pair
(`<base>_peer_a`, `<base>_peer_b`; `kind` names them otherwise than `peer`). Each deployment names the other as its
peer at the other's inbound proxy, so every request between them, both
ways, crosses a `FaultProxy`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from . import databases
from .faultproxy import FaultProxy
from .servers import Daphne, RedisServer, deployed_env, free_port

SECRET = "a-secret-the-two-deployments-share"
# Short enough that a test of an outage waits seconds, not minutes.
LINK_SETTINGS = {
    "MESSAGING_FEDERATION_TIMEOUT": "2",
    "MESSAGING_FEDERATION_BACKOFF_CAP": "1",
    "MESSAGING_FEDERATION_JOIN_WAIT": "5",
}


def template(base_url: str, kind: str = "peer") -> str:
    """The name of the pairs' template database, migrated now (`kind`: the prefix of a run's own databases)."""
    name = f"{databases.database_name(base_url)}_{kind}_template"
    databases.migrated(base_url, name)
    return name


@dataclass
class Deployment:
    node: str
    database_url: str
    redis: RedisServer
    port: int
    # Where its peer's requests come in: a proxy in front of its first server.
    inbound: FaultProxy
    servers: list[Daphne] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.servers[0].url

    def env(self, peer: Deployment, static_root: Path, extra: dict[str, str]) -> dict[str, str]:
        return {
            **deployed_env(self.database_url, self.redis.url, static_root, secret=f"secret-of-{self.node}"),
            "MESSAGING_NODE": self.node,
            "MESSAGING_PEERS": f"{peer.node}={peer.inbound.url}",
            "MESSAGING_PEER_SECRETS": f"{peer.node}={SECRET}",
            **LINK_SETTINGS,
            **extra,
        }


class Pair:
    """Deployments `a` and `b`, each with `servers` daphne processes."""

    def __init__(
        self,
        base_url: str,
        template_name: str,
        directory: Path,
        static_root: Path,
        *,
        servers: int = 1,
        seed: int = 0,
        env: dict[str, str] | None = None,
        app: str = "project.asgi:application",
        kind: str = "peer",
    ) -> None:
        self.base_url = base_url
        self.template = template_name
        self.directory = directory
        self.static_root = static_root
        self.count = servers
        self.extra = dict(env or {})
        self.app = app
        base = databases.database_name(base_url)
        # `kind` keeps the databases of a run (the suite's, `make chaos`'s, a measurement's) apart from another's.
        self.names = {node: f"{base}_{kind}_{node}" for node in ("a", "b")}
        deployments = []
        for n, node in enumerate(("a", "b")):
            port = free_port()
            deployments.append(
                Deployment(
                    node,
                    databases.database_url(base_url, self.names[node]),
                    RedisServer(directory),
                    port,
                    FaultProxy(port, seed=seed * 2 + n),
                )
            )
        self.a, self.b = deployments

    def start(self) -> Pair:
        for node in (self.a, self.b):
            databases.copied(self.base_url, self.template, self.names[node.node])
            node.redis.start()
            node.inbound.start()
        for node, peer in ((self.a, self.b), (self.b, self.a)):
            env = node.env(peer, self.static_root, self.extra)
            node.servers = [
                Daphne(env, port=node.port if i == 0 else None, log_dir=self.directory, app=self.app)
                for i in range(self.count)
            ]
            for server in node.servers:
                server.start()
        return self

    def stop(self) -> None:
        for node in (self.a, self.b):
            for server in node.servers:
                server.stop()
            node.inbound.stop()
            node.redis.stop()

    def drop(self) -> None:
        for name in self.names.values():
            databases.drop(self.base_url, name)

    def logs(self) -> str:
        return "\n".join(f"--- {s.kind} {s.port}\n{s.log()}" for node in (self.a, self.b) for s in node.servers)


def base_url() -> str:
    return os.environ["DATABASE_URL"]
