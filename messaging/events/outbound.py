"""Outbound HTTP requests of the server: a webhook's POST goes only where it was checked to go.

Three defences, in this one place:

- The URL's host is resolved once and every address it gives is checked
  (`forbidden_reason`): loopback, private, link-local, unspecified,
  multicast, reserved and shared (100.64.0.0/10) addresses, and IPv6's
  mapped forms of them, are refused unless the deployment allows them
  (`WEBHOOKS_ALLOW_PRIVATE`). An endpoint of the admin would otherwise reach
  the server's own network: its database, its metadata service.
- The connection goes to the address that was checked, not to the host's
  name (`PinnedHTTPConnection`): a DNS answer that changes between the check
  and the connect (rebinding) is never asked for. For https the TLS handshake
  still names the URL's host (SNI) and the certificate is checked against it.
- `http.client` never follows a redirect: a 3xx is an answer like any other
  that is not a 2xx, a failed attempt. A redirect could lead anywhere, the
  checked addresses included, carrying the request's signature headers.

Proxies (`HTTPS_PROXY`) are not used: the connection is direct.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

# Bytes of an answer read (and thrown away) before the connection is closed.
ANSWER_BYTES = 65536


class Refused(Exception):
    """The destination is one this server does not send requests to."""


def forbidden_reason(address: str) -> str | None:
    """Why a request may not go to `address` (an IP address), or None if it may."""
    ip = ipaddress.ip_address(address)
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1 on a dual-stack socket
    for kind, matches in (
        ("loopback", ip.is_loopback),
        ("unspecified", ip.is_unspecified),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("private", ip.is_private),
    ):
        if matches:
            return kind
    if not ip.is_global:
        return "non-global"  # shared address space (carrier-grade NAT), documentation ranges
    return None


@dataclass(frozen=True)
class Destination:
    """Where a URL's request goes: its parts, and the addresses it was checked to resolve to."""

    scheme: str
    host: str
    port: int
    target: str  # the path and query, as the request line carries them
    addresses: tuple[str, ...]


def split(url: str) -> tuple[str, str, int, str]:
    """The scheme, host, port and request target of an http(s) URL; ValueError for anything else."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"not an http or https URL: {url[:200]!r}")
    if not parts.hostname:
        raise ValueError("the URL has no host")
    port = parts.port or (443 if parts.scheme == "https" else 80)  # .port raises ValueError when out of range
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname, port, target


def resolve(host: str, port: int, *, allow_private: bool) -> tuple[str, ...]:
    """Every address `host` resolves to, once each; `Refused` if any is one no request may go to.

    Any, not all: a name that also resolves to a private address is refused,
    whichever address a connect would have picked.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise OSError(f"cannot resolve {host}: {exc.strerror or exc}") from None
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    if not allow_private:
        for address in addresses:
            reason = forbidden_reason(address)
            if reason is not None:
                shown = host if host == address else f"{host} resolves to {address},"
                raise Refused(f"{shown} a {reason} address (WEBHOOKS_ALLOW_PRIVATE is off)")
    return addresses


def destination(url: str, *, allow_private: bool) -> Destination:
    """The checked destination of `url`: ValueError if it is not an http(s) URL, `Refused`, or OSError."""
    scheme, host, port, target = split(url)
    return Destination(scheme, host, port, target, resolve(host, port, allow_private=allow_private))


class PinnedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection to `address`, whatever `host` resolves to by now; the Host header names `host`."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class PinnedHTTPSConnection(http.client.HTTPSConnection):
    """As `PinnedHTTPConnection`, over TLS whose certificate is checked against `host`, not the address."""

    def __init__(self, host: str, port: int, address: str, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self.address = address
        self.tls = context

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        try:
            self.sock = self.tls.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise


def connect(to: Destination, timeout: float, context: ssl.SSLContext | None = None) -> http.client.HTTPConnection:
    """A connection open to the first of `to`'s checked addresses that answers (as `create_connection` tries them)."""
    failure: OSError | None = None
    for address in to.addresses:
        if to.scheme == "https":
            connection: http.client.HTTPConnection = PinnedHTTPSConnection(
                to.host, to.port, address, timeout, context or ssl.create_default_context()
            )
        else:
            connection = PinnedHTTPConnection(to.host, to.port, address, timeout)
        try:
            connection.connect()
            return connection
        except OSError as exc:
            connection.close()
            failure = exc
    raise failure or OSError(f"{to.host} has no address")


def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    timeout: float,
    allow_private: bool,
    context: ssl.SSLContext | None = None,
) -> tuple[int | None, str]:
    """POST `body` to `url`, never following a redirect: the status (None without an answer) and an error ("" on a 2xx)."""
    try:
        to = destination(url, allow_private=allow_private)
    except Refused as exc:
        return None, f"refused: {exc}"
    except (OSError, ValueError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    try:
        connection = connect(to, timeout, context)
    except OSError as exc:
        return None, f"{type(exc).__name__}: {exc}"
    try:
        connection.request("POST", to.target, body=body, headers=headers)
        response = connection.getresponse()
        response.read(ANSWER_BYTES)
        status = response.status
        location = response.getheader("Location", "")
    except (OSError, http.client.HTTPException) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    finally:
        connection.close()
    if 200 <= status < 300:
        return status, ""
    if 300 <= status < 400:
        return status, f"HTTP {status}: a redirect (to {location[:300]!r}) is not followed"
    return status, f"HTTP {status}"
