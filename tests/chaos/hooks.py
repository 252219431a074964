"""Everything of the chaos harness that runs inside the server: the one module that knows its internals.

Two things, loaded by `tests.chaos.app` into each server process:

* **`wallet.add`**, the test command type: wallet-style counters (a balance
  that each applied command raises by its amount), registered through the
  public extension API. Its table comes with a deferred trigger that makes
  commits fail on demand (the nemesis's `fail-commits`), so the harness can
  fail a transaction after its effect and its record were written.
* **Planted bugs**, switched by `CHAOS_PLANT` in the server's environment, for
  proving that the checker catches them. Each replaces internals named in
  `TARGETS`; whoever moves those internals updates this module, and only it.

The harness imports this module for `WALLET_SCHEMA` and `PLANTS` without a
configured Django: nothing of Django or the app is imported at module level.
"""

from __future__ import annotations

import dataclasses
import os
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

# The internals each planted bug replaces: the whole of the harness's reach
# into the server beyond the public `command` API.
TARGETS: dict[str, tuple[str, ...]] = {
    # A failed delivery keeps its claim: a retry waits for the lease.
    "claim-kept": ("messaging.core.apply.Batch.finish",),
    # The result goes to Redis when the handler returns, before the commit.
    "early-result": ("messaging.core.records.apply_portably", "messaging.core.claims.get_claim_store"),
    # Each process answers duplicates from its own memory of results, filled
    # when the handler returns, before the commit: a rollback leaves it stale.
    "stale-cache": ("messaging.core.records.apply_portably", "messaging.core.claims.RedisClaimStore.claim_many"),
}
PLANTS = tuple(TARGETS)

WALLETS = ("w1", "w2", "w3")

# The test command type's table, created by the harness in its database. A
# commit that took a ticket below `fail_below` fails at COMMIT, after the
# UPDATE and the command's record were written: `fail-commits` raises it.
WALLET_SCHEMA = """
CREATE TABLE chaos_wallet (name text PRIMARY KEY, balance bigint NOT NULL DEFAULT 0);
CREATE TABLE chaos_commit_faults (id int PRIMARY KEY CHECK (id = 1), fail_below bigint NOT NULL DEFAULT 0);
INSERT INTO chaos_commit_faults VALUES (1, 0);
CREATE SEQUENCE chaos_commit_ticket;
CREATE FUNCTION chaos_refuse_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('chaos_commit_ticket') < (SELECT fail_below FROM chaos_commit_faults WHERE id = 1) THEN
        RAISE EXCEPTION 'chaos: this commit is refused (fail-commits)';
    END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER chaos_refuse_commit AFTER UPDATE ON chaos_wallet
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION chaos_refuse_commit();
""" + "".join(f"INSERT INTO chaos_wallet (name) VALUES ('{name}');\n" for name in WALLETS)

# Make the next `n` wallet commits fail (a statement the nemesis runs).
FAIL_COMMITS = """
UPDATE chaos_commit_faults SET fail_below =
    (SELECT CASE WHEN is_called THEN last_value + 1 ELSE 1 END FROM chaos_commit_ticket) + %(n)s
"""
STOP_FAILING_COMMITS = "UPDATE chaos_commit_faults SET fail_below = 0"


def install(environ: dict[str, str] | os._Environ = os.environ) -> None:
    """Register `wallet.add` and plant the bug named by `CHAOS_PLANT`, if any."""
    register_wallet()
    plant = environ.get("CHAOS_PLANT") or None
    if plant is not None:
        if plant not in PLANTERS:
            raise SystemExit(f"CHAOS_PLANT={plant!r}: known plants are {', '.join(PLANTS)}")
        PLANTERS[plant]()


# wallet.add ---------------------------------------------------------------------


def register_wallet() -> None:
    from django.db import connection

    from messaging import command
    from messaging.core.exceptions import Invalid

    @dataclasses.dataclass(frozen=True)
    class Add:
        wallet: str
        amount: int

    def validate(d: dict) -> Add:
        wallet, amount = d.get("wallet"), d.get("amount")
        if wallet not in WALLETS:
            raise Invalid(f"wallet must be one of {', '.join(WALLETS)}")
        if not isinstance(amount, int) or isinstance(amount, bool) or not 1 <= amount <= 100:
            raise Invalid("amount must be an integer from 1 to 100")
        return Add(wallet, amount)

    @command("wallet.add", validate=validate)
    def add(ctx: Any, add: Add) -> dict:
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE chaos_wallet SET balance = balance + %s WHERE name = %s RETURNING balance",
                [add.amount, add.wallet],
            )
            (balance,) = cursor.fetchone()
        return {"wallet": add.wallet, "balance": balance}


# Planted bugs -------------------------------------------------------------------


def plant_claim_kept() -> None:
    from messaging.core.apply import Batch

    finish = Batch.finish

    def finish_keeping_claims(self: Any) -> tuple[list, list]:
        results, _releases = finish(self)
        return results, []

    Batch.finish = finish_keeping_claims


def on_handler_return(remember: Callable[[Any, Any, str, dict], None]) -> None:
    """Call `remember(user, command, fingerprint, result)` when an exactly-once
    handler returns inside its transaction, before the record and the commit."""
    from messaging.core import records

    apply = records.apply_portably

    def apply_and_remember(delivery: Any) -> Any:
        if delivery.fingerprint is None:
            return apply(delivery)
        handler = delivery.handler

        def handler_then_remember(ctx: Any, data: Any) -> dict:
            result = handler.apply(ctx, data)
            remember(delivery.user, delivery.command, delivery.fingerprint, result)
            return result

        return apply(dataclasses.replace(delivery, handler=dataclasses.replace(handler, apply=handler_then_remember)))

    records.apply_portably = apply_and_remember


def plant_early_result() -> None:
    from asgiref.sync import async_to_sync

    from messaging.core import claims

    def store_in_redis(user: Any, command: Any, fingerprint: str, result: dict) -> None:
        key = claims.claim_key(user.pk, command.id)
        # From the database thread, on the server's event loop.
        async_to_sync(claims.get_claim_store().finish)([(key, claims.Stored(fingerprint, result))], [], "early")

    on_handler_return(store_in_redis)


def plant_stale_cache() -> None:
    from messaging.core import claims

    remembered: OrderedDict[str, Any] = OrderedDict()

    def remember(user: Any, command: Any, fingerprint: str, result: dict) -> None:
        remembered[claims.claim_key(user.pk, command.id)] = claims.Stored(fingerprint, result)
        while len(remembered) > 10_000:
            remembered.popitem(last=False)

    on_handler_return(remember)
    claim_many = claims.RedisClaimStore.claim_many

    async def answer_from_memory_first(self: Any, keys: list[str], owner: str) -> list:
        rest = [key for key in keys if key not in remembered]
        replies = iter(await claim_many(self, rest, owner) if rest else ())
        return [remembered[key] if key in remembered else next(replies) for key in keys]

    claims.RedisClaimStore.claim_many = answer_from_memory_first


PLANTERS: dict[str, Callable[[], None]] = {
    "claim-kept": plant_claim_kept,
    "early-result": plant_early_result,
    "stale-cache": plant_stale_cache,
}
assert tuple(PLANTERS) == PLANTS
