"""The socket's route (`ws/`), and routers that hand a connection over instead of awaiting it.

An ASGI layer written as `async def __call__` awaits the application inside
it for the connection's whole life: its coroutine, its frame and the scope
it holds stay as long as the socket does. Channels' `ProtocolTypeRouter`,
`URLRouter` and `as_asgi()`'s per-socket wrapper are three such layers:
three coroutines, and the server's scope and the router's copy kept beside
the consumer's: 1.7-2.0 kB of a socket that only waits (docs/PERFORMANCE.md,
"Idle sockets"). `ProtocolRouter` and `PathRouter` choose the same
application by the same rules, then return its coroutine for the caller to
await: they keep nothing once the connection has begun, and a route to a
consumer's `as_asgi()` starts the consumer itself, without the wrapper.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from asgiref.sync import markcoroutinefunction
from channels.consumer import AsyncConsumer
from channels.routing import ProtocolTypeRouter, URLRouter
from django.urls import Resolver404, path

from .consumers import ChatConsumer

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

websocket_urlpatterns = [
    path("ws/", ChatConsumer.as_asgi()),
]


async def refusal(error: Exception) -> NoReturn:
    """Raise `error` when awaited, where channels' routers raise it: in the connection's task, not the server's call."""
    raise error


# The code of the per-socket function `as_asgi()` returns: the one callback
# whose whole work, making the consumer and awaiting it, `started` does itself.
# A function that only wraps one (`functools.wraps` copies `consumer_class`
# onto it too) is called as it is.
AS_ASGI_CODE = AsyncConsumer.as_asgi().__code__


def started(application: Any, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
    """`application`'s coroutine for this connection; a consumer's `as_asgi()` is the consumer's own `__call__`."""
    if getattr(application, "__code__", None) is AS_ASGI_CODE:
        consumer = application.consumer_class(**application.consumer_initkwargs)
        return consumer(scope, receive, send)  # type: ignore[no-any-return]
    return application(scope, receive, send)  # type: ignore[no-any-return]


class ProtocolRouter(ProtocolTypeRouter):  # type: ignore[misc]  # channels has no types
    """Channels' `ProtocolTypeRouter`, handing the connection to the application of its scope's type."""

    # A plain `__call__` returning a coroutine: marked so that asgiref, daphne
    # and uvicorn take it for an ASGI 3 application, as they do `async def`.
    _asgi_single_callable = True

    @markcoroutinefunction
    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        application = self.application_mapping.get(scope["type"])
        if application is None:
            return refusal(ValueError(f"No application configured for scope type {scope['type']!r}"))
        return started(application, scope, receive, send)


class PathRouter(URLRouter):  # type: ignore[misc]  # channels has no types
    """Channels' `URLRouter` (the same patterns, `path_remaining` and `url_route`), handing the connection to its route.

    A route to another `PathRouter` is resolved on the spot, so that a
    nested router without a match lets the next route try, as channels' do.
    """

    _asgi_single_callable = True

    @markcoroutinefunction
    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        try:
            application, routed = self.resolve(scope)
        except (ValueError, Resolver404) as error:
            return refusal(error)
        return started(application, routed, receive, send)

    def resolve(self, scope: Scope) -> tuple[Any, Scope]:
        """The application of `scope`'s path and the scope it gets; `ValueError` (outermost) or `Resolver404` if none."""
        remaining = scope.get("path_remaining", scope.get("path"))
        if remaining is None:
            raise ValueError("No 'path' key in connection scope, cannot route URLs")
        outermost = "path_remaining" not in scope
        if outermost:
            root_path = scope.get("root_path", "")
            if root_path and not remaining.startswith(root_path):
                raise ValueError(f"No route found for path {remaining!r}.")
            remaining = remaining[len(root_path) :]
        remaining = remaining.lstrip("/")
        for route in self.routes:
            try:
                match = route.pattern.match(remaining)
                if not match:
                    continue
                rest, args, kwargs = match
                outer = scope.get("url_route", {})
                routed = dict(
                    scope,
                    path_remaining=rest,
                    url_route={
                        "args": outer.get("args", ()) + args,
                        "kwargs": {**outer.get("kwargs", {}), **kwargs, **route.default_args},
                    },
                )
                if isinstance(route.callback, PathRouter):
                    return route.callback.resolve(routed)
                return route.callback, routed
            except Resolver404:
                continue
        if outermost:
            raise ValueError(f"No route found for path {remaining!r}.")
        raise Resolver404(f"No route found for path {remaining!r}.")
