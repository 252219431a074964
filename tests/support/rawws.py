"""A WebSocket client on a bare TCP socket, for clients that misbehave at the TCP level.

Kept beside `messaging.testing`'s clients for the hostile tests, because
what they need a client library cannot do: its receive buffer is set before
it connects (so the window it advertises is small from the start), its
frames are written by hand, and nothing is read unless the test asks: the
client that never reads, as a library client (which reads in the
background) cannot be.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import time
import uuid
from urllib.parse import urlsplit


def upgrade_request(host: str, origin: str, session: str, path: str = "/ws/") -> bytes:
    """A client's WebSocket handshake for `path`, signed in by the session cookie."""
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: {origin}\r\n"
        f"Cookie: sessionid={session}\r\n\r\n"
    ).encode()


def client_frame(opcode: int, payload: bytes) -> bytes:
    """One final frame of `opcode`, masked (RFC 6455 5.3: a client masks every frame)."""
    mask = os.urandom(4)
    length = len(payload)
    if length < 126:
        header = struct.pack("!BB", 0x80 | opcode, 0x80 | length)
    elif length < 1 << 16:
        header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, length)
    else:
        header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, length)
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


class RawSocket:
    def __init__(self, base_url: str, session: str, *, receive_buffer: int | None = None, path: str = "/ws/") -> None:
        self.base_url = base_url
        self.session = session
        self.path = path
        self.receive_buffer = receive_buffer
        self.sock: socket.socket | None = None
        self.unread = b""

    def connect(self) -> RawSocket:
        url = urlsplit(self.base_url)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if self.receive_buffer is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
        sock.settimeout(10)
        sock.connect((url.hostname, url.port))
        sock.sendall(upgrade_request(url.netloc, self.base_url, self.session, self.path))
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = sock.recv(1)
            if not chunk:
                raise ConnectionError(f"handshake failed: {response!r}")
            response += chunk
        if not response.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(f"handshake refused: {response!r}")
        self.sock = sock
        return self

    def send_text(self, text: str) -> None:
        """One text frame, masked as a client's."""
        self.sock.sendall(client_frame(0x1, text.encode()))

    def send_command(self, t: str, d: dict, id: str | None = None) -> str:
        id = id or uuid.uuid4().hex
        self.send_text(json.dumps({"id": id, "t": t, "d": d}))
        return id

    def _read(self, n: int, deadline: float) -> bytes:
        while len(self.unread) < n:
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the server closed the TCP connection")
            self.unread += chunk
        data, self.unread = self.unread[:n], self.unread[n:]
        return data

    def frame(self, timeout: float = 10) -> tuple[int, bytes]:
        """The next frame from the server: opcode and payload (server frames are unmasked)."""
        opcode, _, payload = self.raw_frame(timeout)
        return opcode, payload

    def raw_frame(self, timeout: float = 10) -> tuple[int, bytes, bytes]:
        """The next frame from the server: opcode, its bytes as they came (header and payload) and its payload."""
        deadline = time.monotonic() + timeout
        header = self._read(2, deadline)
        length = header[1] & 0x7F
        if length == 126:
            extended = self._read(2, deadline)
            (length,) = struct.unpack("!H", extended)
            header += extended
        elif length == 127:
            extended = self._read(8, deadline)
            (length,) = struct.unpack("!Q", extended)
            header += extended
        payload = self._read(length, deadline)
        return header[0] & 0x0F, header + payload, payload

    def read_until_closed(self, timeout: float = 30) -> tuple[list[dict], int | None]:
        """Every text frame until the server's close frame, and the close code.

        The code is None when the TCP connection ended (reset or closed)
        without a close frame reaching this client.
        """
        deadline = time.monotonic() + timeout
        frames: list[dict] = []
        try:
            while True:
                opcode, payload = self.frame(max(0.05, deadline - time.monotonic()))
                if opcode == 0x8:
                    return frames, struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                if opcode == 0x1:
                    frames.append(json.loads(payload))
        except TimeoutError:
            raise
        except OSError:  # ConnectionError among them: reset, or closed without a close frame
            return frames, None

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
