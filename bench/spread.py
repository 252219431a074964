"""Where the sockets curve's N sockets come from: which load-generator process
opens each one, from which loopback source address, to which server; and
whether a step of N fits the box's file descriptors and ephemeral ports.

Pure arithmetic, so that tests/unit can hold it to its word without a server.

The kernel picks a connection's local port when its socket binds, before it
knows the destination: every socket bound to one source address takes a port
of its own from `net.ipv4.ip_local_port_range`, whatever server it goes to.
So one source address carries at most that range's size of sockets; the
curve spreads them over 127.0.0.2, 127.0.0.3, ... (every address of 127/8 is
the loopback's on Linux), and over several generator processes, each of which
also holds one descriptor per socket under its own `RLIMIT_NOFILE`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Descriptors a process needs besides its sockets: the interpreter's, its
# logs, a server's connections to PostgreSQL and Redis, an epoll, pipes.
FD_RESERVE = 256
# The first source address: 127.0.0.1 is the servers' own.
FIRST_SOURCE = 2


def parse_counts(text: str) -> list[int]:
    """ "10000,25000" (or one number) as the steps of a curve: positive, each above the one before."""
    try:
        counts = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"not a comma-separated list of whole numbers: {text!r}") from None
    if not counts or any(n <= 0 for n in counts):
        raise ValueError(f"every count must be positive: {text!r}")
    if counts != sorted(set(counts)):
        raise ValueError(f"the counts must grow from one step to the next: {text!r}")
    return counts


def port_count(port_range: str) -> int:
    """How many ephemeral ports `net.ipv4.ip_local_port_range` ("32768\\t60999") allows."""
    low, high = (int(part) for part in port_range.split())
    return max(0, high - low + 1)


def source_address(index: int) -> str:
    """The `index`-th loopback source address: 127.0.0.2, 127.0.0.3, ..., 127.0.1.0, ..."""
    n = FIRST_SOURCE + index
    if n >= 256**3 - 1:
        raise ValueError("out of loopback addresses")
    return f"127.{n // 65536}.{n // 256 % 256}.{n % 256}"


@dataclass(frozen=True)
class Layout:
    """The generators and source addresses of a whole curve (sized for its largest step)."""

    generators: int
    addresses: tuple[str, ...]

    def share(self, n: int, generator: int) -> int:
        """Sockets generator `generator` holds when `n` are open: socket i is generator i mod G's."""
        return n // self.generators + (generator < n % self.generators)

    def address_of(self, k: int) -> str:
        """The source address of a generator's `k`-th socket: each generator goes round all of them."""
        return self.addresses[k % len(self.addresses)]

    def index_of(self, generator: int, k: int) -> int:
        """The curve-wide index of generator `generator`'s `k`-th socket (its session, its server)."""
        return generator + k * self.generators

    def per_address(self, n: int) -> dict[str, int]:
        """Sockets from each source address when `n` are open."""
        counts = dict.fromkeys(self.addresses, 0)
        a = len(self.addresses)
        for g in range(self.generators):
            share = self.share(n, g)
            for i, address in enumerate(self.addresses):
                counts[address] += share // a + (i < share % a)
        return counts


def layout(
    most: int,
    *,
    generators: int = 0,
    addresses: int = 0,
    per_generator: int = 20000,
    per_address: int = 20000,
    fd_limit: int | None = None,
    ports: int | None = None,
) -> Layout:
    """Generators and addresses for a curve whose largest step is `most` sockets:
    at least as many as asked (0: as few as fit), and enough that no generator
    holds more than `per_generator` sockets (nor more than its descriptor
    limit allows) and no address carries more than `per_address` (nor more
    than the port range holds)."""
    if fd_limit is not None:
        per_generator = min(per_generator, fd_limit - FD_RESERVE)
    if ports is not None:
        per_address = min(per_address, ports)
    if per_generator <= 0 or per_address <= 0:
        raise ValueError("no room for a single socket per generator or per address")
    g = max(generators, math.ceil(most / per_generator), 1)
    a = max(addresses, math.ceil(most / per_address), 1)
    return Layout(g, tuple(source_address(i) for i in range(a)))


def misfits(n: int, *, servers: int, layout: Layout, fd_limit: int, ports: int) -> list[str]:
    """Why `n` sockets cannot be held here (empty: they can, as far as descriptors and ports go)."""
    reasons = []
    per_server = math.ceil(n / servers)
    if per_server + FD_RESERVE > fd_limit:
        reasons.append(
            f"file descriptors: each of {servers} server process(es) needs about "
            f"{per_server + FD_RESERVE:,} ({per_server:,} sockets), its limit is {fd_limit:,}"
        )
    per_generator = layout.share(n, 0)
    if per_generator + FD_RESERVE > fd_limit:
        reasons.append(
            f"file descriptors: each of {layout.generators} generator(s) needs about "
            f"{per_generator + FD_RESERVE:,}, its limit is {fd_limit:,}"
        )
    busiest = max(layout.per_address(n).values())
    if busiest > ports:
        reasons.append(f"ephemeral ports: {busiest:,} sockets from one source address, the port range holds {ports:,}")
    return reasons
