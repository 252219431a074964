"""Deprecated: the Python client is its own distribution now, `messaging-client` (`import messaging_client`).

This module is an alias of it for one release, so that `from messaging.client
import Client` and `from messaging.client.outbox import Outbox` keep working
(the same objects as `messaging_client`'s); importing it warns. It needs the
client installed: `pip install messaging-client`, or the app's `client`
extra. A bot or a script needs nothing else of the app: install
`messaging-client` alone, without Django.
"""

from __future__ import annotations

import sys
import warnings

from messaging_client import *  # noqa: F403  the names 0.2 documented here
from messaging_client import __all__ as __all__
from messaging_client import auth, client, connection, http, ids, outbox, redirects, rooms

# `messaging.client.outbox` and the other submodules are the client's own modules, not copies.
for _module in (auth, client, connection, http, ids, outbox, redirects, rooms):
    sys.modules[f"{__name__}.{_module.__name__.rpartition('.')[2]}"] = _module

warnings.warn(
    "messaging.client is deprecated and goes in the next release: the client is the messaging-client "
    "distribution, imported as messaging_client (`pip install messaging-client`)",
    DeprecationWarning,
    # 2: the code that imported this module; warnings skips the import machinery's frames between.
    stacklevel=2,
)
