"""The targets a run is checked against (issue 26, and those of issue 6 still standing)."""

from __future__ import annotations

from .configs import DAPHNE_ECHO

# Issue 26: the full path's share of the echo consumer's acks/s, per server.
FULL_OF_ECHO = {"daphne": 0.8, "uvicorn": 0.6}


def targets(peak: dict, curves: dict, idle: dict | None, big: dict | None = None, server: str = "daphne") -> dict:
    """Each target of issue 26 (and those of issue 6 still standing) with its measured value
    and whether it was met (None: not measured). The target across servers (full on
    uvicorn >= echo on daphne) is measured where a uvicorn run has `DAPHNE_ECHO` beside it."""

    def ratio(a: str, b: str) -> float | None:
        if a in peak and b in peak and peak[b]["acks_per_s"]:
            return round(peak[a]["acks_per_s"] / peak[b]["acks_per_s"], 2)
        return None

    half = next((p for p in curves.get("full", []) if p["fraction"] == 0.5), None)
    share = FULL_OF_ECHO.get(server, 0.6)
    measured = [
        (f"full / echo >= {share} ({server})", ratio("full", "echo"), share, True),
        ("full / tutorial >= 5", ratio("full", "tutorial"), 5, True),
        *(
            [("full (uvicorn) / echo on daphne >= 1", ratio("full", DAPHNE_ECHO), 1, True)]
            if server == "uvicorn"
            else []
        ),
        ("duplicates / first-time >= 2", ratio("full, duplicates only", "full, first-time posts only"), 2, True),
        ("receipts / first-time >= 0.5", ratio("full, receipts", "full, first-time posts only"), 0.5, True),
        ("p99 ms at half of peak <= 25", half["p99_ms"] if half else None, 25, False),
        # The target (issue 26) is stated for 10,000 sockets; a smaller --idle is no measure of it.
        ("idle MB for 10000 sockets <= 300", idle["rss_mb"] if idle and idle["sockets"] >= 10000 else None, 300, False),
    ]
    if big:
        measured += [
            (
                "big room: share of posts reaching every socket >= 1",
                round(big["posts_reaching_all"] / big["posts"], 3) if big["posts"] else None,
                1,
                True,
            ),
            ("big room: p99 ms from ack to last delivery <= 150", big["ack_to_last_delivery_p99_ms"], 150, False),
            # O(members) frames for all members' receipts: a constant per receipt (1 would be one per sender's message).
            ("big room: frames per receipt <= 1", big["frames_per_receipt"], 1, False),
        ]
    met = {
        name: {"value": value, "met": None if value is None else (value >= limit if at_least else value <= limit)}
        for name, value, limit, at_least in measured
    }
    # Not targets: the same ratio for the stack alone, what the box allows, and
    # for the duplicates Redis answers, where the database takes no share.
    # Issue 26 retired the 1.5x target for two processes on these 2 cores (docs/PERFORMANCE.md).
    met["two processes / one"] = {"value": ratio("full, two processes", "full"), "met": None}
    met["echo: two processes / one"] = {"value": ratio("echo, two processes", "echo"), "met": None}
    met["duplicates only: two processes / one"] = {
        "value": ratio("full, duplicates only, two processes", "full, duplicates only"),
        "met": None,
    }
    return met
