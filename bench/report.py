"""The bench's results as the Markdown tables docs/PERFORMANCE.md shows, and its latency plot.

Built from the report `python -m bench` writes as JSON, so a table in the doc
is the run's own, not a transcription of it.
"""

from __future__ import annotations

from pathlib import Path

from messaging.ops.metrics import BATCH_PHASE_NAMES

from .cpu import ratio

# (heading, key in a run's summary, digits; None rounds to a whole number)
PEAK_COLUMNS = [
    ("acks/s", "acks_per_s", None),
    ("p50 ms", "p50_ms", None),
    ("p95 ms", "p95_ms", None),
    ("p99 ms", "p99_ms", None),
    ("fan-out frames/s", "fanout_frames_per_s", None),
    ("server CPU (cores)", "server_cpu_cores", 2),
    ("server CPU per ack (us)", "server_cpu_us_per_ack", 1),
    ("PostgreSQL (cores)", "postgresql_cpu_cores", 2),
    ("Redis (cores)", "redis_cpu_cores", 2),
    ("load generator (cores)", "client_cpu_cores", 2),
    ("box busy (cores)", "box_busy_cores", 2),
    ("box CPU per ack (us)", "box_cpu_us_per_ack", None),
    ("server RSS MB", "server_rss_mb", None),
]
BATCH_COLUMNS = [
    ("batches/s", "batches_per_s", None),
    ("commands per batch", "batch_mean_size", 1),
    *((f"{phase} ms", f"batch_{phase}_ms", 2) for phase in BATCH_PHASE_NAMES),
]
CURVE_COLUMNS = [
    ("acks/s", "acks_per_s", None),
    ("p50 ms", "p50_ms", 1),
    ("p95 ms", "p95_ms", 1),
    ("p99 ms", "p99_ms", 1),
    ("server CPU (cores)", "server_cpu_cores", 2),
]


def cell(value: float | None, digits: int | None) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if digits is not None else f"{round(value)}"


def headings(columns: list[tuple]) -> list[str]:
    return [heading for heading, _, _ in columns]


def cells(source: dict, columns: list[tuple]) -> list[str]:
    """`source`'s values of `columns`, formatted."""
    return [cell(source.get(key), digits) for _, key, digits in columns]


def verdict(target: dict) -> str:
    if target["value"] is None:
        return "not measured"
    return {True: "yes", False: "no", None: "not a target"}[target["met"]]


def table(headings: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headings) + " |", "|" + " --- |" * len(headings)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


BIG_ROOM_ROWS = [
    ("sockets in the room (half on each process)", "sockets"),
    ("posts (senders x per second each)", None),
    ("seconds of posting (planned)", None),
    ("posts that reached every socket", "posts_reaching_all"),
    ("posts unacked within 30 s", "post_timeouts"),
    ("`msg` frames/s delivered", "msg_frames_per_s"),
    ("post ack p50 / p99 ms, from when due", None),
    ("post ack p50 / p99 ms, from when sent", None),
    ("ack to last delivery, p50 / p99 / max ms", None),
    ("receipts/s (every member at once)", "receipts_per_s"),
    ("receipt ack p50 / p99 ms", None),
    ("frames to all sockets per receipt", "frames_per_receipt"),
    ("load generator CPU (cores)", "client_cpu_cores"),
    ("servers' full collections while posting: count / ms in all / longest under ms", None),
    ("servers' young collections (generations 0, 1): count / ms in all", None),
    ("servers' loop lag samples: 50 ms or more / all; p99 under ms", None),
    ("servers' CPU while posting, us per `msg` frame", None),
]

FRACTIONAL = {"frames_per_receipt", "client_cpu_cores", "receipts_per_s"}


def joined(big: dict, keys: tuple[str, ...]) -> str:
    return " / ".join(cell(big.get(k), 1) for k in keys)


def loop_cells(servers: list[dict], frames: float = 0.0) -> dict[str, str]:
    """Both servers' collections, loop lag and CPU while the posts went out (bench/loopstats.py), added up;
    `frames`: the `msg` frames delivered meanwhile."""
    if not servers:
        return {}
    if not all("cpu_seconds" in s for s in servers):
        frames = 0.0
    full = [s["gc2"] for s in servers]
    young = [s[g] for s in servers for g in ("gc0", "gc1")]
    lags = [s["lag"] for s in servers]
    longest = max((g["longest_under_ms"] or 0 for g in full), default=0)
    p99 = max((lag["p99_under_ms"] or 0 for lag in lags), default=0)
    return {
        "servers' full collections while posting: count / ms in all / longest under ms": (
            f"{sum(g['count'] for g in full)} / {cell(sum(g['total_ms'] for g in full), 1)} / {cell(longest, 1)}"
        ),
        "servers' young collections (generations 0, 1): count / ms in all": (
            f"{sum(g['count'] for g in young)} / {cell(sum(g['total_ms'] for g in young), 1)}"
        ),
        "servers' loop lag samples: 50 ms or more / all; p99 under ms": (
            f"{sum(lag['at_least_50ms'] for lag in lags)} / {sum(lag['samples'] for lag in lags)}; {cell(p99, 1)}"
        ),
        "servers' CPU while posting, us per `msg` frame": cell(
            sum(s.get("cpu_seconds", 0.0) for s in servers) / frames * 1e6 if frames else None, 1
        ),
    }


def big_room_table(bigs: list[dict]) -> str:
    """The big room's runs (bench/bigroom.py), a column for each size."""

    def composed(big: dict) -> dict[str, str]:
        return {
            "posts (senders x per second each)": f"{big['posts']} ({big['senders']} x {big['per_second']}/s)",
            "seconds of posting (planned)": f"{cell(big.get('posting_seconds'), 1)} ({cell(big.get('planned_seconds'), 0)})",
            "post ack p50 / p99 ms, from when due": joined(big, ("post_ack_p50_ms", "post_ack_p99_ms")),
            "post ack p50 / p99 ms, from when sent": joined(big, ("post_round_trip_p50_ms", "post_round_trip_p99_ms")),
            "ack to last delivery, p50 / p99 / max ms": joined(
                big, ("ack_to_last_delivery_p50_ms", "ack_to_last_delivery_p99_ms", "ack_to_last_delivery_max_ms")
            ),
            "receipt ack p50 / p99 ms": joined(big, ("receipt_ack_p50_ms", "receipt_ack_p99_ms")),
            **loop_cells(
                big.get("servers_loop") or [], (big.get("msg_frames_per_s") or 0) * (big.get("posting_seconds") or 0)
            ),
        }

    return table(
        ["big room", *(f"{big['sockets']:,} members" for big in bigs)],
        [
            [
                name,
                *(
                    composed(big).get(name, "-")
                    if key is None
                    else cell(big.get(key), 2 if key in FRACTIONAL else None)
                    for big in bigs
                ),
            ]
            for name, key in BIG_ROOM_ROWS
        ],
    )


# The full path against plain Channels echo on one server: (row, full's config, echo's config).
CPU_PAIRS = [("{server}", "full", "echo"), ("{server}, two processes", "full, two processes", "echo, two processes")]


def idle_text(idle: dict) -> str:
    """The idle check in a sentence: memory, then CPU where it was measured."""
    text = (
        f"{idle['sockets']:,} idle signed-in sockets: the process grew from "
        f"{idle['rss_before_mb']:.0f} MB to {idle['rss_mb']:.0f} MB"
    )
    if idle.get("kb_per_socket") is not None:
        text += f", {idle['kb_per_socket']:.2f} kB a socket"
    if idle.get("server_cpu_cores") is not None:
        text += (
            f"; over {idle['window_seconds']:.0f} s it spent {idle['server_cpu_cores']:.4f} of a core "
            f"({idle['server_cpu_cores_per_10k']:.4f} per 10,000 sockets)"
        )
        if idle.get("postgresql_cpu_cores") is not None:
            text += f", PostgreSQL {idle['postgresql_cpu_cores']:.3f} and Redis {idle['redis_cpu_cores']:.3f}"
    if idle.get("open_at_end") is not None:
        text += f"; {idle['open_at_end']:,} still open at the end"
    floor = idle.get("floor")
    if floor:
        # The same sockets on the server alone (bench/floor.py): what of the kB above the server keeps.
        text += (
            f". The server alone, an app that only accepts them, grew from {floor['rss_before_mb']:.0f} MB to "
            f"{floor['rss_mb']:.0f} MB with {floor['sockets']:,}: {floor['kb_per_socket']:.2f} kB a socket"
        )
        if floor.get("server_cpu_cores") is not None:
            text += f", {floor['server_cpu_cores_per_10k']:.4f} of a core per 10,000"
    return text + "."


def target_table(found: dict) -> str:
    """Targets as a table: each one's measured value and whether it was met."""
    return table(
        ["target", "measured", "met"],
        [[name, "-" if t["value"] is None else f"{t['value']}", verdict(t)] for name, t in found.items()],
    )


def cpu_per_ack(median: dict, server: str) -> list[dict]:
    """Server CPU per ack, the full path's against echo's on the run's server (one
    process, and two where measured), beside their acks/s and each ratio full/echo."""
    rows = []
    for label, full, echo in CPU_PAIRS:
        if full in median and echo in median:
            f, e = median[full], median[echo]
            rows.append(
                {
                    "server": label.format(server=server),
                    "full_acks_per_s": f["acks_per_s"],
                    "echo_acks_per_s": e["acks_per_s"],
                    "acks_full_over_echo": ratio(f["acks_per_s"], e["acks_per_s"]),
                    "full_server_cpu_us_per_ack": f.get("server_cpu_us_per_ack"),
                    "echo_server_cpu_us_per_ack": e.get("server_cpu_us_per_ack"),
                    "cpu_per_ack_full_over_echo": ratio(f.get("server_cpu_us_per_ack"), e.get("server_cpu_us_per_ack")),
                }
            )
    return rows


CPU_COLUMNS = [
    ("full acks/s", "full_acks_per_s", None),
    ("echo acks/s", "echo_acks_per_s", None),
    ("acks full/echo", "acks_full_over_echo", 2),
    ("full: server CPU per ack (us)", "full_server_cpu_us_per_ack", 1),
    ("echo: server CPU per ack (us)", "echo_server_cpu_us_per_ack", 1),
    ("CPU per ack full/echo", "cpu_per_ack_full_over_echo", 2),
]


def markdown(report: dict) -> str:
    """The peak table (medians of the rounds, each column on its own, with each
    round's acks/s), the full path's batches, the latency curve and the targets."""
    median, rounds = report["median"], report["rounds"]
    parts = [
        table(
            ["configuration", *headings(PEAK_COLUMNS), "acks/s of the rounds"],
            [
                [name, *cells(m, PEAK_COLUMNS), "/".join(cell(run["acks_per_s"], None) for run in rounds[name])]
                for name, m in median.items()
            ],
        )
    ]
    batched = {name: m for name, m in median.items() if "batches_per_s" in m}
    if batched:
        parts.append(
            table(
                ["configuration", *headings(BATCH_COLUMNS), "cycle ms (the three)"],
                [
                    [
                        name,
                        *cells(m, BATCH_COLUMNS),
                        cell(sum(m[f"batch_{phase}_ms"] for phase in BATCH_PHASE_NAMES), 2),
                    ]
                    for name, m in batched.items()
                ],
            )
        )
    curve_rows = []
    for config, points in report["latency_vs_load"].items():
        for point in points:
            by_fraction = report["latency_rounds"][config]
            # Keyed by the fraction itself, or by its text once read back from JSON.
            of_rounds = by_fraction.get(point["fraction"]) or by_fraction.get(str(point["fraction"]), [])
            curve_rows.append(
                [
                    config,
                    f"{round(point['offered_per_s'])} ({point['fraction']:.0%})",
                    *cells(point, CURVE_COLUMNS),
                    ", ".join(cell(run["p99_ms"], 1) for run in of_rounds),
                ]
            )
    if curve_rows:
        parts.append(
            table(
                ["configuration", "offered/s (share of peak)", *headings(CURVE_COLUMNS), "p99 of the rounds"],
                curve_rows,
            )
        )
    if report["idle"]:
        idle = report["idle"]
        parts.append(idle_text(idle))
    if report.get("cpu_per_ack"):
        parts.append(
            table(
                ["server", *headings(CPU_COLUMNS)],
                [[row["server"], *cells(row, CPU_COLUMNS)] for row in report["cpu_per_ack"]],
            )
        )
    bigs = report.get("big_rooms") or ([report["big_room"]] if report.get("big_room") else [])
    if bigs:
        parts.append(big_room_table(bigs))
    if report["targets"]:
        parts.append(target_table(report["targets"]))
    if report.get("search"):
        parts.append(search_table(report["search"]))
    return "\n\n".join(parts) + "\n"


def search_table(search: dict) -> str:
    """`room.search` on the big room, per kind of query, and the uploads of 1 MiB (bench/search.py)."""
    rows = [
        [
            f"room.search, {kind} ({search['messages']:,} messages)",
            cell(m["p50_ms"], 2),
            cell(m["p99_ms"], 2),
            str(m["n"]),
        ]
        for kind, m in search["search"].items()
    ]
    uploads = search["uploads_1_mib"]
    rows.append(
        [
            f"POST /api/uploads, 1 MiB, {uploads['at_once']} at once: {uploads['mib_per_s']} MiB/s",
            cell(uploads["p50_ms"], 2),
            cell(uploads["p99_ms"], 2),
            str(uploads["n"]),
        ]
    )
    return table(["what", "p50 ms", "p99 ms", "n"], rows)


def plot(curves: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for config, points in curves.items():
        x = [p["offered_per_s"] for p in points]
        (line,) = ax.plot(x, [p["p99_ms"] for p in points], marker="o", label=f"{config} p99")
        ax.plot(
            x, [p["p50_ms"] for p in points], marker=".", linestyle="--", color=line.get_color(), label=f"{config} p50"
        )
    ax.set_xlabel("offered load (commands/s)")
    ax.set_ylabel("ack latency (ms)")
    ax.set_yscale("log")
    ax.axhline(25, color="grey", linewidth=0.8, linestyle=":")
    ax.set_title("ack latency against offered load (16 sockets, W=4, 10% duplicates)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    import json
    import sys

    # `python -m bench.report [results.json]`: the tables of an earlier run.
    print(
        markdown(json.loads(Path(sys.argv[1] if len(sys.argv) > 1 else "artifacts/bench/results.json").read_text())),
        end="",
    )
