"""The sockets curve's report (bench/sockets.py) as a Markdown table and a plot
of memory and idle CPU per 10,000 sockets as N grows; extrapolated steps are
marked in both."""

from __future__ import annotations

from pathlib import Path

from .report import cell, table, target_table

# (heading, key, digits)
COLUMNS = [
    ("opened/s", "opened_per_s", None),
    ("server RSS MB", "server_rss_mb", None),
    ("growth MB per 10k", "server_rss_mb_per_10k", 1),
    ("server idle CPU (cores)", "server_cpu_cores", 3),
    ("per 10k", "server_cpu_cores_per_10k", 4),
    ("generators RSS MB", "generators_rss_mb", None),
    ("per 10k", "generators_rss_mb_per_10k", 1),
    ("generators CPU (cores)", "generators_cpu_cores", 3),
    ("PostgreSQL (cores)", "postgresql_cpu_cores", 3),
    ("Redis (cores)", "redis_cpu_cores", 3),
    ("open at end", "open_at_end", None),
]


# What an idle step keeps busy, in cores.
BUSY = ("server_cpu_cores", "generators_cpu_cores", "postgresql_cpu_cores", "redis_cpu_cores")


def markdown(curve: dict) -> str:
    limits = curve["limits"]
    lines = [
        f"{curve['server']}, {curve['processes']} server process(es); {curve['generators']} generator process(es); "
        f"source addresses {', '.join(curve['source_addresses'])}; opening at most "
        f"{curve['options']['open_rate']:,.0f}/s; settle {curve['options']['settle']:.0f} s, "
        f"window {curve['options']['window']:.0f} s; handshake throttle "
        f"{'off' if curve.get('connect_rate') == '0' else 'CONNECT_RATE=' + str(curve.get('connect_rate'))}.",
        f"Limits: open files {limits['fd_soft']:,} (soft) / {limits['fd_hard']:,} (hard) per process, "
        f"fs.nr_open {limits['fs.nr_open']}, fs.file-max {limits['fs.file-max']}; "
        f"ip_local_port_range {limits['net.ipv4.ip_local_port_range']} "
        f"({limits['ports_per_source_address']:,} sockets per source address).",
        "",
    ]
    base = curve["baseline"]
    rows = [
        [
            "0 (baseline)",
            "-",
            cell(base["server_rss_mb"], None),
            "-",
            cell(base["server_cpu_cores"], 3),
            "-",
            cell(base.get("generators_rss_mb"), None),
            "-",
            "-",
            cell(base["postgresql_cpu_cores"], 3),
            cell(base["redis_cpu_cores"], 3),
            "0",
        ]
    ]
    for step in curve["steps"]:
        rows.append([f"{step['sockets']:,}", *(cell(step.get(key), digits) for _, key, digits in COLUMNS)])
    for step in curve["extrapolated"]:
        rows.append(
            [
                f"{step['sockets']:,} (extrapolated)",
                *(
                    "-" if key in ("opened_per_s", "open_at_end") else cell(step.get(key), digits)
                    for _, key, digits in COLUMNS
                ),
            ]
        )
    lines.append(table(["sockets", *(heading for heading, _, _ in COLUMNS)], rows))
    cpus = curve.get("cpus")
    for step in curve["extrapolated"]:
        busy = sum(step[key] for key in BUSY)
        if cpus and busy > cpus:
            lines += [
                "",
                f"At {step['sockets']:,} sockets the line's idle CPU (servers, generators, PostgreSQL, "
                f"Redis) comes to {busy:.1f} cores, more than the box's {cpus}: it could not hold them "
                "even idle.",
            ]
            break
    if curve.get("targets"):
        lines += ["", target_table(curve["targets"])]
    stopped = curve["stopped"]
    if stopped:
        lines += [
            "",
            f"Stopped at {stopped['at']:,} sockets: "
            + "; ".join(stopped["reasons"])
            + (
                ". The rows marked extrapolated are the measured steps' straight line, not measurements."
                if curve["extrapolated"]
                else "."
            ),
        ]
    return "\n".join(lines) + "\n"


def plot(curve: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (memory, cpu) = plt.subplots(1, 2, figsize=(10, 4.2))
    # The extrapolated line starts from the last measured step.
    guessed = curve["steps"][-1:] + curve["extrapolated"] if curve["extrapolated"] else []
    for steps, style, label in ((curve["steps"], "-o", "measured"), (guessed, "--o", "extrapolated")):
        if not steps:
            continue
        x = [s["sockets"] for s in steps]
        fill = "full" if label == "measured" else "none"
        memory.plot(x, [s["server_rss_mb_per_10k"] for s in steps], style, fillstyle=fill, color="C0", label=label)
        cpu.plot(x, [s["server_cpu_cores_per_10k"] for s in steps], style, fillstyle=fill, color="C1", label=label)
    memory.set_title("server memory growth per 10,000 sockets")
    memory.set_ylabel("MB per 10,000 sockets")
    cpu.set_title("server idle CPU per 10,000 sockets")
    cpu.set_ylabel("cores per 10,000 sockets")
    for ax in (memory, cpu):
        ax.set_xlabel("open idle sockets (N)")
        top = max((line.get_ydata().max() for line in ax.get_lines()), default=1.0)
        ax.set_ylim(0, top * 1.15 or 1.0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{curve['server']}, {curve['processes']} process(es), signed-in idle sockets", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
