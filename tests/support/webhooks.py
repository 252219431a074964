"""A webhook receiver for the tests: a real local HTTP server that applies each event once,
keyed by its Idempotency-Key, checks the signature, and misbehaves on cue."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from messaging.events import webhooks

SECRET = "whsec-test"


class Receiver:
    """A webhook receiver that applies each event once, keyed by its Idempotency-Key, and misbehaves on cue."""

    def __init__(self, script: list[str]) -> None:
        self.script = list(script)  # per request: "fail", "slow" (applies, answers late), "ok"
        self.effects: dict[str, dict] = {}
        self.requests: list[dict] = []
        receiver = self

        class Handle(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                signed = webhooks.verify(SECRET, self.headers[webhooks.SIGNATURE_HEADER], body)
                key = self.headers["Idempotency-Key"]
                receiver.requests.append({"key": key, "signed": signed, "body": body, "headers": dict(self.headers)})
                action = receiver.script.pop(0) if receiver.script else "ok"
                if action == "fail" or not signed:
                    self.send_response(500)
                    self.end_headers()
                    return
                receiver.effects.setdefault(key, json.loads(body))
                if action == "slow":
                    time.sleep(1.5)  # past the sender's timeout: it will try again
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handle)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
