"""A nats-server with JetStream of the test's own, from the `nats-server` binary on a free port."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess

import nats

from .servers import free_port, wait_until


class NatsServer:
    """A nats-server with JetStream of the test's own."""

    def __init__(self, directory) -> None:
        self.port = free_port()
        self.dir = directory
        self.process = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> NatsServer:
        self.process = subprocess.Popen(
            [
                shutil.which("nats-server") or "/usr/sbin/nats-server",
                "-a",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-js",
                "-sd",
                str(self.dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: asyncio.run(nats_ping(self.url)), 10, "nats-server")
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None


async def nats_ping(url: str) -> bool:
    client = await nats.connect(url, allow_reconnect=False, connect_timeout=1)
    await client.close()
    return True
