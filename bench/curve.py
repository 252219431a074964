"""The sockets curve's arithmetic: what a step costs per 10,000 sockets, and
the straight line through the measured steps that extrapolates the ones the
box could not hold (always labelled as such)."""

from __future__ import annotations

PER = 10_000


def per_10k(value: float | None, sockets: int) -> float | None:
    """`value` (measured at `sockets` open sockets) per 10,000 of them."""
    if value is None or sockets <= 0:
        return None
    return value / sockets * PER


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares intercept and slope through (x, y) points; a single point is a line through the origin."""
    if not points:
        raise ValueError("no points to fit")
    if len(points) == 1 or len({x for x, _ in points}) == 1:
        x, y = points[-1]
        return 0.0, (y / x if x else 0.0)
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    return mean_y - slope * mean_x, slope


def extrapolate(points: list[tuple[float, float]], at: float) -> float:
    """The fitted line's value at `at`."""
    intercept, slope = fit_line(points)
    return intercept + slope * at


# What a step reports, and which of it the line extrapolates.
LINEAR = (
    "server_rss_mb",
    "server_cpu_cores",
    "generators_rss_mb",
    "generators_cpu_cores",
    "postgresql_cpu_cores",
    "redis_cpu_cores",
)


def step_costs(step: dict, baseline: dict) -> dict:
    """A step's costs per 10,000 sockets: the servers' and the generators'
    memory growth over the baseline (no socket open), the servers' idle CPU
    over the baseline's, the generators' CPU."""
    n = step["sockets"]
    grown = step["server_rss_mb"] - baseline["server_rss_mb"]
    return {
        "server_rss_growth_mb": round(grown, 1),
        "server_rss_mb_per_10k": round(per_10k(grown, n), 1),
        "server_cpu_cores_per_10k": round(per_10k(step["server_cpu_cores"] - baseline["server_cpu_cores"], n), 4),
        "generators_rss_mb_per_10k": round(per_10k(step["generators_rss_mb"] - baseline["generators_rss_mb"], n), 1),
        "generators_cpu_cores_per_10k": round(per_10k(step["generators_cpu_cores"], n), 4),
    }


def extrapolated_step(n: int, measured: list[dict], baseline: dict) -> dict:
    """What the measured steps' line says of a step of `n` sockets (no measurement)."""
    step = {"sockets": n, "extrapolated": True}
    for key in LINEAR:
        points = [(0.0, baseline[key])] + [(s["sockets"], s[key]) for s in measured if s.get(key) is not None]
        step[key] = round(extrapolate(points, n), 3)
    return {**step, **step_costs(step, baseline)}
