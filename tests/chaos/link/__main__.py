"""`python -m tests.chaos.link`: one link run (what `make chaos` runs after the nemesis of one deployment).

Settings from the environment: `CHAOS_SECONDS` (300), `CHAOS_SEED` (random,
printed), `CHAOS_LINK_CLIENTS` (3 per side), and `DATABASE_URL`, after whose
database the run's are named (`<name>_link_template`, `<name>_link_a`,
`<name>_link_b`). The report and the servers' logs go to
`artifacts/chaos/link-seed-<seed>/`. Exit status 1 on a violation.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import sys

from ...support import databases
from ...support.deployments import Pair, template
from ...support.servers import ROOT, collected_static
from .run import Config, run


def main() -> int:
    seed = int(os.environ.get("CHAOS_SEED") or random.randrange(1, 10**6))
    config = Config(
        seconds=float(os.environ.get("CHAOS_SECONDS") or 300),
        seed=seed,
        clients=int(os.environ.get("CHAOS_LINK_CLIENTS") or 3),
    )
    directory = ROOT / "artifacts" / "chaos" / f"link-seed-{seed}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    base_url = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/messaging"
    print(
        f"link chaos: seed {seed}, {config.seconds:g} s, {config.clients} clients a side; files in {directory}",
        flush=True,
    )
    name = template(base_url, "link")
    pair = Pair(base_url, name, directory, collected_static(directory), seed=seed, kind="link").start()
    try:
        report = asyncio.run(run(config, pair, directory))
    finally:
        pair.stop()
        pair.drop()
        databases.drop(base_url, name)
    print(report.summary())
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
