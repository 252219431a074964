"""`ProtocolRouter` and `PathRouter` (messaging/transport/routing.py): channels' routing rules, with the
chosen application's coroutine handed back rather than awaited, so nothing of theirs lives as long as a socket."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest
from asgiref.compatibility import guarantee_single_callable, is_double_callable
from channels.consumer import AsyncConsumer
from channels.routing import URLRouter
from django.urls import Resolver404, path, re_path
from uvicorn.config import Config

from messaging.transport.routing import PathRouter, ProtocolRouter


def recorder(name: str, seen: list[tuple[str, dict[str, Any]]]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> str:
        seen.append((name, scope))
        return name

    return app


class Recorded(AsyncConsumer):
    """A consumer whose `__call__` only records what it was given."""

    made: list[Recorded] = []

    def __init__(self, label: str) -> None:
        self.label = label
        Recorded.made.append(self)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> str:
        self.scope = scope
        return self.label


def http(path_: str, **more: Any) -> dict[str, Any]:
    return {"type": "http", "path": path_, **more}


@pytest.mark.parametrize(
    "scope",
    [
        http("/rooms/lobby/"),
        http("/rooms/7/page/2/"),
        http("/chat/rooms/lobby/", root_path="/chat"),
        http("/static/x"),
        http("/rooms/"),
    ],
)
async def test_a_path_goes_where_channels_url_router_sends_it_with_the_same_scope(scope):
    def patterns(seen: list) -> list:
        return [
            path("rooms/<int:number>/page/<int:page>/", recorder("page", seen)),
            path("rooms/<slug:name>/", recorder("room", seen), {"kind": "public"}),
            re_path(r"^static/(\w+)$", recorder("static", seen)),
        ]

    ours: list = []
    theirs: list = []
    try:
        expected = await URLRouter(patterns(theirs))(dict(scope), None, None)
    except ValueError as refusal:
        expected = refusal
    returned = PathRouter(patterns(ours))(dict(scope), None, None)
    assert asyncio.iscoroutine(returned)  # handed back, not awaited
    if isinstance(expected, ValueError):
        with pytest.raises(ValueError, match="No route found"):
            await returned
        assert ours == []
        return
    assert await returned == expected
    assert ours == theirs


async def test_a_nested_router_without_a_match_lets_the_next_route_try():
    seen: list = []
    inner = PathRouter([path("a/", recorder("inner", seen))])
    router = PathRouter([path("api/", inner), path("api/<str:rest>", recorder("fallback", seen))])
    assert await router(http("/api/a/"), None, None) == "inner"
    assert seen[-1][1]["path_remaining"] == ""
    assert await router(http("/api/b"), None, None) == "fallback"
    assert seen[-1][1]["url_route"] == {"args": (), "kwargs": {"rest": "b"}}
    with pytest.raises(Resolver404):
        await PathRouter([path("a/", recorder("x", seen))])(http("/b/", path_remaining="b/"), None, None)


async def test_a_route_to_a_consumers_as_asgi_starts_the_consumer_itself():
    Recorded.made.clear()
    router = PathRouter([path("ws/", Recorded.as_asgi(label="chat"))])
    scope = {"type": "websocket", "path": "/ws/"}
    started = router(scope, None, None)
    # The consumer's own coroutine: no `as_asgi()` wrapper awaiting it for the socket's life.
    assert started.cr_code is Recorded.__call__.__code__
    assert await started == "chat"
    (consumer,) = Recorded.made
    assert consumer.scope == {**scope, "path_remaining": "", "url_route": {"args": (), "kwargs": {}}}
    assert "path_remaining" not in scope  # the caller's scope is left as it was


async def test_a_function_wrapping_an_as_asgi_app_is_called_not_bypassed():
    Recorded.made.clear()
    inner = Recorded.as_asgi(label="wrapped")
    calls = []

    @functools.wraps(inner)  # copies `consumer_class` and `consumer_initkwargs` onto the wrapper
    async def logged(scope, receive, send):
        calls.append(scope["path"])
        return await inner(scope, receive, send)

    assert logged.consumer_class is Recorded
    started = PathRouter([path("ws/", logged)])({"type": "websocket", "path": "/ws/"}, None, None)
    assert started.cr_code is logged.__code__
    assert await started == "wrapped" and calls == ["/ws/"]


async def test_the_protocol_router_hands_over_by_type_and_refuses_an_unknown_one_when_awaited():
    seen: list = []
    router = ProtocolRouter({"http": recorder("http", seen), "websocket": recorder("websocket", seen)})
    started = router({"type": "websocket", "path": "/ws/"}, None, None)
    assert started.cr_code.co_name == "app"
    assert await started == "websocket"
    refused = router({"type": "lifespan"}, None, None)  # raised in the connection's task, as channels' does
    with pytest.raises(ValueError, match="No application configured for scope type 'lifespan'"):
        await refused


@pytest.mark.parametrize("router", [ProtocolRouter({}), PathRouter([])])
def test_servers_take_the_routers_for_asgi_3_applications(router):
    assert not is_double_callable(router)  # asgiref, daphne
    assert guarantee_single_callable(router) is router
    config = Config(router, lifespan="off")
    config.load()
    assert config.interface == "asgi3"  # uvicorn
