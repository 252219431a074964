"""Whether a library already loaded is a version that a replacement of its internals was checked on.

daphne_sweeps.py, daphne_pings.py, daphne_reads.py and servers/daphne.py
replace or reach into daphne's, autobahn's and Twisted's private methods.
Each does so only on the versions it was read against, and leaves any other
version its own behaviour. They look at `sys.modules`, not at an import, so
that under another server nothing of daphne's is loaded for the question.
"""

from __future__ import annotations

import sys


def checked(module: str, versions: str | tuple[str, ...]) -> bool:
    """Whether `module` is loaded and its `__version__` starts with one of `versions`."""
    return str(getattr(sys.modules.get(module), "__version__", "")).startswith(versions)


# Daphne's internals that daphne_sweeps.py, daphne_pings.py and daphne_queues.py replace were read on daphne 4.
CHECKED_DAPHNE = "4."


def checked_daphne() -> bool:
    """Whether the daphne loaded is a version the replacements of its internals were checked on."""
    return checked("daphne", CHECKED_DAPHNE)
