"""A real Redis Cluster for tests: masters with a replica each, from the `redis-server` binary on free ports.

Every node is a process of the test's own (its own port, directory and
cluster config file), so a test may kill a master and watch its replica take
over without touching any other Redis.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from .servers import wait_until

# A node also listens on its port + 10000 (the cluster bus): both must be free,
# and under 65536, which the kernel's ephemeral ports (up to 60999) are not.
BUS_OFFSET = 10000


def free_node_port() -> int:
    for _ in range(1000):
        port = random.randrange(20000, 30000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + BUS_OFFSET))
        except OSError:
            continue
        return port
    raise RuntimeError("no free pair of ports for a cluster node")


@dataclass
class Node:
    port: int
    dir: Path
    process: subprocess.Popen | None = None

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=2)

    def role(self) -> str | None:
        try:
            role = self.client().execute_command("ROLE")[0]
            return role.decode() if isinstance(role, bytes) else role
        except redis.RedisError:
            return None


class RedisCluster:
    """`masters` masters, each with `replicas` replicas, all on 127.0.0.1."""

    def __init__(self, directory: Path, *, masters: int = 3, replicas: int = 1, node_timeout_ms: int = 1000) -> None:
        self.masters, self.replicas = masters, replicas
        self.node_timeout_ms = node_timeout_ms
        self.nodes = []
        for _ in range(masters * (1 + replicas)):
            port = free_node_port()
            node_dir = directory / f"redis-{port}"
            node_dir.mkdir(parents=True)
            self.nodes.append(Node(port, node_dir))

    @property
    def url(self) -> str:
        """A URL of one node: a cluster client discovers the rest from it."""
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    def start(self) -> RedisCluster:
        for node in self.nodes:
            self._start_node(node)
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        subprocess.run(
            [
                shutil.which("redis-cli") or "redis-cli",
                "--cluster",
                "create",
                *addresses,
                "--cluster-replicas",
                str(self.replicas),
                "--cluster-yes",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            timeout=60,
        )
        # Replicas attach after `create` returns: a master killed before its
        # replica is listed has nobody to take over.
        self.wait_healthy(replicated=True)
        return self

    def _start_node(self, node: Node) -> None:
        node.process = subprocess.Popen(
            [
                shutil.which("redis-server") or "redis-server",
                "--port",
                str(node.port),
                "--bind",
                "127.0.0.1",
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                str(node.dir / "nodes.conf"),
                "--cluster-node-timeout",
                str(self.node_timeout_ms),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(node.dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: node.client().ping(), 10, f"redis-server on {node.port}")

    def live(self) -> list[Node]:
        return [node for node in self.nodes if node.process is not None]

    def wait_healthy(self, timeout: float = 60, *, replicated: bool = False) -> None:
        """Until every live node sees the cluster `ok`, every slot served by a live
        master (and, `replicated`, every master listing all its replicas)."""

        def healthy() -> bool:
            for node in self.live():
                if node.client().cluster("info").get("cluster_state") != "ok":
                    return False
            masters = [node for node in self.live() if node.role() == "master"]
            if len(masters) != self.masters:
                return False
            if replicated:
                ranges = self.live()[0].client().execute_command("CLUSTER SLOTS")
                return all(len(entry) - 3 == self.replicas for entry in ranges)
            return True

        wait_until(healthy, timeout, "the cluster's state ok")

    def master_of(self, key: str) -> Node:
        """The live node that serves `key`'s slot now."""
        client = self.nodes[0].client() if self.nodes[0].process else self.live()[0].client()
        slot = client.execute_command("CLUSTER KEYSLOT", key)
        for start, end, master, *_ in client.execute_command("CLUSTER SLOTS"):
            if start <= slot <= end:
                port = master[1]
                return next(node for node in self.nodes if node.port == port)
        raise LookupError(f"no master serves slot {slot}")

    def kill(self, node: Node) -> None:
        """SIGKILL one node, as a crash would."""
        if node.process is not None:
            node.process.kill()
            node.process.wait()
            node.process = None

    def fail_over(self, key: str, timeout: float = 60) -> Node:
        """Kill the master that serves `key` and wait until a replica serves its slots; the killed node."""
        master = self.master_of(key)
        self.kill(master)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.wait_healthy(timeout=1)
                if self.master_of(key).port != master.port:
                    return master
            except (RuntimeError, redis.RedisError, LookupError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"no replica took over from {master.port} within {timeout}s")

    def stop(self) -> None:
        for node in self.nodes:
            self.kill(node)
