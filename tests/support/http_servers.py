"""Real local HTTP servers for the tests of outbound requests: one that records what reaches it, one that redirects."""

from __future__ import annotations

import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class Recorder:
    """An HTTP server on `host` that records every request (method, path, headers, body) and answers `status`.

    With `tls` (a server-side SSL context) it speaks https. `location`, when
    given, is sent as the `Location` header: with a 3xx status it redirects.
    """

    def __init__(
        self,
        status: int = 200,
        *,
        host: str = "127.0.0.1",
        location: str | None = None,
        body: bytes = b'{"ok": true}',
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.status, self.location, self.body = status, location, body
        self.requests: list[dict] = []
        recorder = self

        class Handle(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # a WebSocket client reads no other

            def answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                recorder.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": dict(self.headers),
                        "body": self.rfile.read(length) if length else b"",
                    }
                )
                self.send_response(recorder.status)
                if recorder.location is not None:
                    self.send_header("Location", recorder.location)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(recorder.body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(recorder.body)

            do_GET = do_POST = do_PUT = do_HEAD = answer

            def log_message(self, *args) -> None:
                pass

        server_class = _Server6 if ":" in host else ThreadingHTTPServer
        self.server = server_class((host, 0), Handle)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"{'https' if tls else 'http'}://{shown}:{self.port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def redirector(to: str, status: int = 302) -> Recorder:
    """A server that answers every request with a redirect to `to`."""
    return Recorder(status, location=to, body=b"")
