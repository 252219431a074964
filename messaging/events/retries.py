"""How long the events' loops wait before trying again.

The relay and the webhooks wait with full jitter (uniform under an
exponential cap), so processes that failed together do not retry together;
the consumers' reconnect loops wait the cap itself. One formula for all of
them: `base * 2**attempt`, at most `cap`.
"""

from __future__ import annotations

import random


def exponential(attempt: int, *, base: float = 0.1, cap: float = 5.0) -> float:
    """`base * 2**attempt` seconds, at most `cap`."""
    return min(cap, base * 2.0**attempt)


def full_jitter(attempt: int, *, base: float = 0.1, cap: float = 5.0) -> float:
    """Uniform in [0, `exponential(attempt)`]."""
    return random.uniform(0, exponential(attempt, base=base, cap=cap))
