"""What an idle daphne connection keeps, made smaller once its handshake is done: `release_handshake`.

Autobahn keeps the handshake's request, headers and negotiation for the
connection's life, copies its factory's options into every connection, and
starts a few dozen flags that an idle connection never changes, each in the
connection's own dict. `release_handshake` (called as the connection's send
buffer is made, servers/daphne.py) lets the handshake's part go and reads
the options and the idle flags from a class the factory's connections share.
Only on the autobahn and daphne versions this was checked on
(transport/versions.py); elsewhere only the handshake's bytes and headers go.
"""

from __future__ import annotations

from typing import Any

from ..versions import CHECKED_DAPHNE, checked
from .asgi import refit
from .queues import SendQueue

# What autobahn's server handshake alone reads (processHandshake,
# succeedHandshake, failHandshake: the request, its headers, what they
# negotiated, the origin policy copied from the factory), checked on autobahn
# 26.10, and daphne's `protocol_to_accept`, which nothing reads.
HANDSHAKE_ATTRIBUTES = (
    "http_request_data",
    "http_response_data",
    "http_status_line",
    "http_request_uri",
    "http_request_path",
    "http_request_params",
    "http_request_host",
    "http_headers",
    "_wskey",
    "websocket_origin",
    "websocket_protocols",
    "websocket_extensions",
    "versions",
    "flashSocketPolicy",
    "allowedOrigins",
    "allowedOriginsPatterns",
    "protocol_to_accept",
)
CHECKED_AUTOBAHN = "26."
# Deferreds of the handshake, each fired once by its end and read by nothing
# after: daphne's creation of the application (daphne 4, ws_protocol.py
# `onConnect`) and autobahn's `is_open`. Each is about 330 bytes with its
# dict, its callbacks' list and its context. `is_closed` stays: it fires at the close.
FIRED_BY_THE_HANDSHAKE = (("application_deferred", "daphne", CHECKED_DAPHNE), ("is_open", "autobahn", CHECKED_AUTOBAHN))


# What an open connection starts with and keeps while it is idle: autobahn's
# flags of a close, a ping or a message under way, daphne's empty buffers.
# Held by the connections' class (`shared_class`) while they are at these
# values; set, a value goes back into the connection's own dict.
IDLE_DEFAULTS: dict[str, Any] = {
    **dict.fromkeys(
        (
            "triggered",
            "inside_message",
            "wasMaxFramePayloadSizeExceeded",
            "wasMaxMessagePayloadSizeExceeded",
            "closedByMe",
            "failedByMe",
            "droppedByMe",
            "wasClean",
            "wasServerConnectionDropTimeout",
            "wasOpenHandshakeTimeout",
            "wasCloseHandshakeTimeout",
            "wasServingFlashSocketPolicyFile",
        ),
        False,
    ),
    **dict.fromkeys(
        (
            "_perMessageCompress",
            "trackedTimings",
            "wasNotCleanReason",
            "localCloseCode",
            "localCloseReason",
            "remoteCloseCode",
            "remoteCloseReason",
            "openHandshakeTimeoutCall",
            "closeHandshakeTimeoutCall",
            "autoPingTimeoutCall",
            "autoPingPending",
            "autoPingPendingCall",
            "autoPingPendingSent",
            "websocket_protocol_in_use",
            "current_frame",
        ),
        None,
    ),
    "send_state": 0,
    "autoPingPendingSeq": 0,
    "data": b"",
    "_raw_query_string": b"",
    "root_path": "",
}


def shared_class(protocol: Any) -> type | None:
    """A subclass of the connection's class holding its factory's options and `IDLE_DEFAULTS` as class attributes.

    Autobahn copies its factory's options (`CONFIG_ATTRS`, 25 of them) into
    every connection, and starts about 30 flags at values an idle connection
    keeps. Read from the class instead, they leave the connection's own dict
    at about 30 keys: a table of 0.8 kB, not 1.6. The class is the factory's
    (one per class of its connections), made with its options of the time
    and kept on it, so it lives and goes with it; None without a factory.
    """
    cls = type(protocol)
    if cls.__dict__.get("_shared_by_connections", False):
        return cls
    factory = getattr(protocol, "factory", None)
    if factory is None:
        return None
    made: dict[type, type] = factory.__dict__.setdefault("_shared_connection_classes", {})
    shared = made.get(cls)
    if shared is None:
        # The handshake's own lists (the versions and origins it accepts) are
        # not held: release_handshake drops them.
        names = [name for name in getattr(cls, "CONFIG_ATTRS", ()) if name not in HANDSHAKE_ATTRIBUTES]
        options = {name: getattr(factory, name) for name in names if hasattr(factory, name)}
        held = {**IDLE_DEFAULTS, **options, "_shared_by_connections": True}
        # The same names, for Twisted's log prefix and anything that prints the class.
        shared = made[cls] = type(
            cls.__name__, (cls,), {**held, "__qualname__": cls.__qualname__, "__module__": cls.__module__}
        )
    return shared


def same_value(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and a == b)


def share_what_is_common(protocol: Any, attributes: dict[str, Any]) -> None:
    """Move the connection to `shared_class`, its own entries that the class holds at the same value dropped."""
    shared = shared_class(protocol)
    if shared is None:
        return
    for name, value in list(attributes.items()):
        if name in shared.__dict__ and same_value(value, shared.__dict__[name]):
            del attributes[name]
    protocol.__class__ = shared


def release_handshake(protocol: Any) -> None:
    """Let go of what daphne's connection keeps of its finished handshake.

    Autobahn keeps the request's bytes, its parsed headers (the same dict as
    daphne's `request.headers`, of which daphne reads only the path, for its
    log; the ASGI scope has its own copy of the headers), the response's
    text and what they negotiated, for the connection's life. Without them
    the protocol's 99 attributes are 82, and a copy of its `__dict__` (`refit`) fits a
    table half the size (a dict never shrinks as keys go): 1.6 kB, and about
    1.3 kB of the handshake's own, a socket. On an autobahn version this was
    not checked on, only the headers' and the messages' contents go. The
    handshake's Deferreds that have fired go too (`FIRED_BY_THE_HANDSHAKE`),
    an empty `send_queue` becomes a `SendQueue`, and the factory's options
    and the idle connection's flags are read from its class
    (`share_what_is_common`): about 30 attributes left, 0.8 kB of table.
    """
    headers = getattr(protocol, "http_headers", None)
    if isinstance(headers, dict):
        headers.clear()
    if not checked("autobahn", CHECKED_AUTOBAHN):
        for name, empty in (("http_request_data", b""), ("http_response_data", "")):
            if hasattr(protocol, name):
                setattr(protocol, name, empty)
        return
    attributes = protocol.__dict__
    for name in HANDSHAKE_ATTRIBUTES:
        attributes.pop(name, None)
    if not attributes.get("send_queue"):
        attributes["send_queue"] = SendQueue()
    for name, library, versions in FIRED_BY_THE_HANDSHAKE:
        deferred = attributes.get(name)
        # Only once it has fired: a handshake still under way keeps it.
        if getattr(deferred, "called", False) and checked(library, versions):
            del attributes[name]
    share_what_is_common(protocol, attributes)
    refit(protocol)
