"""`python -m tests.chaos`: one chaos run (what `make chaos` does); exit status 1 on a violation.

Settings from the environment, as `make chaos` passes them: `CHAOS_SECONDS`
(300), `CHAOS_SEED` (random, printed), `CHAOS_CLIENTS` (30), `CHAOS_SERVERS`
(2), `CHAOS_PLANT` (none: a planted bug, tests/chaos/hooks.py), and
`DATABASE_URL`, whose server the run's databases go to (named after its
database, `<name>_chaos` and `<name>_chaos_template`). The run's files (the
report, the faults, the servers' logs, the clients' outbox files) go to
`artifacts/chaos/seed-<seed>/`.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import sys

from ..support.servers import ROOT
from .harness import Config, run
from .stack import Stack


def main() -> int:
    seed = int(os.environ.get("CHAOS_SEED") or random.randrange(1, 10**6))
    config = Config(
        seconds=float(os.environ.get("CHAOS_SECONDS") or 300),
        seed=seed,
        clients=int(os.environ.get("CHAOS_CLIENTS") or 30),
        servers=int(os.environ.get("CHAOS_SERVERS") or 2),
        plant=os.environ.get("CHAOS_PLANT") or None,
    )
    directory = ROOT / "artifacts" / "chaos" / f"seed-{seed}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    print(
        f"chaos: seed {seed}, {config.seconds:g} s, {config.clients} clients, {config.servers} servers;"
        f" files in {directory}",
        flush=True,
    )
    stack = Stack(os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/messaging", directory).start()
    try:
        report = asyncio.run(run(config, stack, directory))
    finally:
        stack.stop()
        stack.drop_databases()
    print(report.summary())
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
