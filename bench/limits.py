"""The box's limits on sockets: open files per process and in all, ephemeral
ports, and the accept queue; and the raise of this process's open-files
limit to the hard one, which the processes it starts inherit."""

from __future__ import annotations

import resource
from pathlib import Path

from .spread import port_count


def raise_fd_limit() -> tuple[int, int]:
    """The soft limit on open files raised to the hard one (an unprivileged
    process can go no further); both, as they are then."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def sysctl(name: str) -> str | None:
    """A kernel setting by its sysctl name ("fs.nr_open"), None where /proc does not have it."""
    try:
        return Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        return None


def system_limits() -> dict:
    """What bounds the sockets one box can hold, as this process sees it."""
    soft, hard = raise_fd_limit()
    port_range = sysctl("net.ipv4.ip_local_port_range")
    return {
        "fd_soft": soft,
        "fd_hard": hard,
        "fs.nr_open": sysctl("fs.nr_open"),
        "fs.file-max": sysctl("fs.file-max"),
        "net.ipv4.ip_local_port_range": " ".join(port_range.split()) if port_range else None,
        "ports_per_source_address": port_count(port_range) if port_range else None,
        "net.core.somaxconn": sysctl("net.core.somaxconn"),
    }
