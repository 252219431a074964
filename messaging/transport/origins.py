"""Which pages may open the WebSocket: the `Origin` check of the handshake.

A browser sends the session cookie with a WebSocket handshake whatever page
opens it, so a foreign page could act as the signed-in user (cross-site
WebSocket hijacking). The handshake is accepted only from an origin that is
equal, scheme, host and port, to one of `CSRF_TRUSTED_ORIGINS` where that is
set, and else to the origin of the handshake itself: `http` for `ws`, `https`
for `wss` (or as `SECURE_PROXY_SSL_HEADER` says behind a proxy), and the
`Host` header with its port, a host in `ALLOWED_HOSTS`. Everything else,
a missing `Origin` and `null` included, is refused with HTTP 403.

channels' `AllowedHostsOriginValidator` compares the host alone, so a page on
`http://chat.example.com:8080` (or on plain http, next to an https site) passed.

`origin_allowed` takes plain values; `OriginValidator` is the ASGI
middleware; `SameOriginValidator(app)` builds one from Django's settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

DEFAULT_PORTS = {"http": 80, "https": 443}


class Origin(NamedTuple):
    scheme: str
    host: str
    port: int


def parse_origin(text: str) -> Origin | None:
    """`scheme://host[:port]` as a tuple with the default port filled in, or None if it is no such thing."""
    try:
        parts = urlsplit(text.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/") or parts.query:
        return None
    if parts.username is not None or parts.password is not None:
        return None
    return Origin(parts.scheme, parts.hostname, port if port is not None else DEFAULT_PORTS[parts.scheme])


def origin_allowed(
    origin: str | None, *, scheme: str, host: str, trusted_origins: Sequence[str], allowed_hosts: Sequence[str]
) -> bool:
    """Whether a handshake with this `Origin` header may go on.

    `scheme` is the page's scheme the handshake implies (`http` or `https`),
    `host` its `Host` header. A trusted origin may name subdomains as Django's
    CSRF check reads them: `https://*.example.com`.
    """
    given = parse_origin(origin) if origin else None
    if given is None:
        return False
    if trusted_origins:
        return any(_matches(given, pattern) for pattern in trusted_origins)
    own = parse_origin(f"{scheme}://{host}")
    return own is not None and given == own and validate_host(split_domain_port(host)[0], allowed_hosts)


def _matches(given: Origin, pattern: str) -> bool:
    if "*." not in pattern:
        return given == parse_origin(pattern)
    # `https://*.example.com` is the domain and every subdomain of it, on the default port unless given.
    wanted = parse_origin(pattern.replace("*.", "", 1))
    return (
        wanted is not None
        and (given.scheme, given.port) == (wanted.scheme, wanted.port)
        and is_same_domain(given.host, "." + wanted.host)
    )


class OriginValidator:
    """ASGI middleware for the `websocket` route: a refused handshake never reaches `application`."""

    def __init__(
        self,
        application: Any,
        *,
        trusted_origins: Sequence[str] = (),
        allowed_hosts: Sequence[str] = (),
        proxy_ssl_header: tuple[str, str] | None = None,
    ) -> None:
        self.application = application
        self.trusted_origins = tuple(trusted_origins)
        self.allowed_hosts = tuple(allowed_hosts)
        # Django's form, ("HTTP_X_FORWARDED_PROTO", "https"), as the ASGI header's name.
        self.proxy_ssl_header = (
            (proxy_ssl_header[0].removeprefix("HTTP_").lower().replace("_", "-").encode("latin1"), proxy_ssl_header[1])
            if proxy_ssl_header
            else None
        )

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] != "websocket":
            raise ValueError("OriginValidator guards WebSocket connections only")
        # Decided in a call of its own: this frame lives as long as the socket,
        # and its locals (the decoded headers, about 1 kB) with it.
        if not self.allows(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)

    def allows(self, scope: dict[str, Any]) -> bool:
        headers: dict[bytes, str] = {}
        for name, value in scope.get("headers", ()):
            # A repeated header is ambiguous: keep the first, as a second cannot make a bad origin good.
            headers.setdefault(name, value.decode("latin1"))
        return origin_allowed(
            headers.get(b"origin"),
            scheme=self.page_scheme(scope, headers),
            host=headers.get(b"host", ""),
            trusted_origins=self.trusted_origins,
            allowed_hosts=self.allowed_hosts,
        )

    def page_scheme(self, scope: dict[str, Any], headers: dict[bytes, str]) -> str:
        """The scheme of the page this handshake belongs to, as Django's `request.is_secure()` decides it."""
        if self.proxy_ssl_header is not None:
            name, secure_value = self.proxy_ssl_header
            if name in headers:
                return "https" if headers[name].split(",", 1)[0].strip() == secure_value else "http"
        return "https" if scope.get("scheme", "ws") in ("wss", "https") else "http"


def SameOriginValidator(application: Any) -> OriginValidator:
    """An `OriginValidator` from `CSRF_TRUSTED_ORIGINS`, `ALLOWED_HOSTS` and `SECURE_PROXY_SSL_HEADER`."""
    allowed_hosts = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed_hosts:
        # What Django's `request.get_host()` allows then.
        allowed_hosts = [".localhost", "127.0.0.1", "[::1]"]
    return OriginValidator(
        application,
        trusted_origins=settings.CSRF_TRUSTED_ORIGINS,
        allowed_hosts=allowed_hosts,
        proxy_ssl_header=settings.SECURE_PROXY_SSL_HEADER,
    )
