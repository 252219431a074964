"""`messaging.client`, deprecated: for one release an alias of the client's own distribution,
`messaging_client` (clients/python), that warns where it is imported."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.servers import ROOT

OLD_IMPORTS = """
from messaging.client import Client, sign_in
from messaging.client.outbox import Outbox
import messaging.client.auth
import messaging_client, messaging_client.auth, messaging_client.outbox
assert Client is messaging_client.Client and sign_in is messaging_client.sign_in
assert Outbox is messaging_client.outbox.Outbox and messaging.client.auth is messaging_client.auth
print("same")
"""


def test_the_old_path_imports_the_clients_own_objects_and_warns_the_code_that_imported_it():
    # Python's default filters: a DeprecationWarning shows where it is blamed on __main__, as in a script.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    proc = subprocess.run([sys.executable, "-c", OLD_IMPORTS], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "same"
    [warning] = [line for line in proc.stderr.splitlines() if "DeprecationWarning" in line]
    assert warning.startswith("<string>:2: DeprecationWarning: messaging.client is deprecated")
    assert "pip install messaging-client" in warning
