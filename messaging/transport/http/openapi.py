"""The OpenAPI 3 document of the HTTP API, kept by hand beside the view it describes.

A few endpoints (a command; a file up and down) do not need a framework to
derive them; tests/unit/test_api_openapi.py checks that it loads as OpenAPI 3 and
that every status and refusal code the view answers is in it, and the
schema-driven fuzzer (schemathesis, tests/e2e/test_api_fuzz.py) runs from it
against a live server and fails on any answer it does not describe.
"""

from __future__ import annotations

import copy
from typing import Any

from ... import __version__
from ...core import handlers

COMMAND_ID = {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}

ERROR = {
    "type": "object",
    "required": ["code", "message", "retry"],
    "properties": {
        "code": {
            "type": "string",
            "enum": ["invalid", "unknown_type", "forbidden", "id_reused", "in_progress", "unavailable", "rate_limited"],
        },
        "message": {"type": "string"},
        "retry": {"type": "boolean"},
        "retry_after": {"type": "number", "description": "seconds to wait (rate_limited)"},
    },
}

ACK = {
    "type": "object",
    "description": "The ack a socket would get for the command (docs/PROTOCOL.md).",
    "required": ["t", "id", "ok"],
    "properties": {
        "t": {"const": "ack"},
        "id": {"type": "string"},
        "ok": {"type": "boolean"},
        "dup": {"type": "boolean", "description": "true on every ack but the first of one command"},
        "d": {"type": "object", "description": "the command type's result"},
        "error": {"$ref": "#/components/schemas/Error"},
    },
}

ERROR_FRAME = {
    "type": "object",
    "description": "The answer to a request that is no command: no credentials, no valid key, no JSON object.",
    "required": ["t", "error"],
    "properties": {
        "t": {"const": "error"},
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        },
    },
}


def _ack(description: str, **headers: dict[str, Any]) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Ack"}}},
    }
    if headers:
        response["headers"] = headers
    return response


def _error_frame(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorFrame"}}},
    }


RETRY_AFTER = {"description": "whole seconds to wait before the retry", "schema": {"type": "integer", "minimum": 1}}

UPLOAD = {
    "type": "object",
    "description": "An upload, as `room.post`'s `attachments` and `msg` frames list it (PROTOCOL.md 1.2, Files).",
    "required": ["upload", "name", "size", "content_type", "url"],
    "properties": {
        "upload": {"type": "string", "format": "uuid"},
        "name": {"type": "string"},
        "size": {"type": "integer", "minimum": 0},
        "content_type": {"type": "string"},
        "url": {"type": "string", "description": "where GET serves the bytes, a path on this server"},
    },
}
BYTES = {"schema": {"type": "string", "format": "binary"}}


def _upload(description: str, **headers: dict[str, Any]) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Upload"}}},
    }
    if headers:
        response["headers"] = headers
    return response


UPLOADS = {
    "post": {
        "operationId": "upload",
        "summary": "Store a file once per key; answer the upload",
        "description": (
            "The body is the file, Content-Type its type (checked against the bytes; text/plain, "
            "application/pdf, image/png, image/jpeg, image/gif and image/webp, and what the deployment "
            "allows). The same (user, Idempotency-Key) with the same bytes answers the same upload."
        ),
        "security": [{"bearer": []}, {"session": [], "csrf": []}],
        "parameters": [
            {"name": "Idempotency-Key", "in": "header", "required": True, "schema": COMMAND_ID},
            {
                "name": "Upload-Filename",
                "in": "header",
                "required": True,
                "description": "the file's name, URL-encoded UTF-8, 1-255 characters decoded",
                "schema": {"type": "string"},
            },
        ],
        "requestBody": {
            "required": True,
            "content": {
                kind: BYTES
                for kind in ("image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf", "text/plain")
            },
        },
        "responses": {
            "201": _upload("stored"),
            "200": _upload(
                "this key's upload, stored before with the same bytes",
                **{"Idempotent-Replayed": {"description": "true", "schema": {"type": "string", "enum": ["true"]}}},
            ),
            "400": _error_frame("a bad or missing key, or a name that is a path or holds control characters"),
            "401": _error_frame("no valid credentials"),
            "403": _error_frame("a session without its CSRF token"),
            "405": _error_frame("not a POST"),
            "413": _error_frame("larger than MAX_UPLOAD_BYTES; nothing kept"),
            "415": _error_frame("a type not allowed here, or bytes not of the type they say"),
            "422": _error_frame("the key was used for other bytes"),
            "429": {
                **_error_frame("rate_limited, or too many uploads not posted yet"),
                "headers": {"Retry-After": RETRY_AFTER},
            },
            "503": {**_error_frame("storage failed, nothing kept"), "headers": {"Retry-After": RETRY_AFTER}},
        },
    }
}

UPLOADED_FILE = {
    "get": {
        "operationId": "download",
        "summary": "An upload's bytes, to the members of the room it was posted in (before, to its uploader)",
        "description": "Anyone else, signed in or not, gets 404, as for an id that never was.",
        "security": [{"bearer": []}, {"session": []}, {}],
        "parameters": [
            {"name": "upload", "in": "path", "required": True, "schema": {"type": "string", "format": "uuid"}},
            {"name": "Range", "in": "header", "required": False, "schema": {"type": "string"}},
        ],
        "responses": {
            "200": {"description": "the bytes", "content": {"*/*": BYTES}},
            "206": {"description": "the range asked for", "content": {"*/*": BYTES}},
            "304": {"description": "as the client has it (If-None-Match)"},
            "404": _error_frame("no such file, or not one for this caller"),
            "405": {"description": "not a GET or HEAD"},
            "416": {"description": "a range past the end"},
        },
    }
}

DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "messaging",
        "version": __version__,
        "description": "Commands over HTTP: the WebSocket protocol's commands, exactly once, with the same ids.",
    },
    "paths": {
        "/api/commands": {
            "post": {
                "operationId": "submitCommand",
                "summary": "Run one command, as a socket would, and answer its ack",
                "description": (
                    "The same (user, Idempotency-Key) over HTTP and over a socket is one command: it takes effect "
                    "once, however often and however concurrently it is sent; every delivery gets the ack of the "
                    "one that applied it."
                ),
                "security": [{"bearer": []}, {"session": [], "csrf": []}],
                "parameters": [
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": False,
                        "description": "The command's id; required for exactly-once types (room.post, a host's own).",
                        "schema": COMMAND_ID,
                    }
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["t", "d"],
                                "properties": {
                                    "t": {
                                        "type": "string",
                                        "description": "the command type (those registered: `document`)",
                                        "examples": ["room.post"],
                                    },
                                    "d": {
                                        "type": "object",
                                        "description": "the command's data",
                                        "examples": [{"room": "lobby", "body": "hello"}],
                                    },
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "200": _ack(
                        "applied, or a replay of the applied command",
                        **{
                            "Idempotent-Replayed": {
                                "description": "true on a replay",
                                "schema": {"type": "string", "enum": ["true"]},
                            }
                        },
                    ),
                    "400": {
                        "description": "invalid or unknown_type (an ack), or a bad or missing key or a body "
                        "that is no JSON object (an error frame)",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "oneOf": [
                                        {"$ref": "#/components/schemas/Ack"},
                                        {"$ref": "#/components/schemas/ErrorFrame"},
                                    ]
                                }
                            }
                        },
                    },
                    "401": _error_frame("no valid credentials"),
                    "403": {
                        "description": "forbidden (an ack), or a session without its CSRF token (an error frame)",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "oneOf": [
                                        {"$ref": "#/components/schemas/Ack"},
                                        {"$ref": "#/components/schemas/ErrorFrame"},
                                    ]
                                }
                            }
                        },
                    },
                    "405": _error_frame("not a POST"),
                    "409": _ack(
                        "in_progress: the first attempt with this key is still running", **{"Retry-After": RETRY_AFTER}
                    ),
                    "413": _error_frame("the body is larger than MAX_FRAME_BYTES"),
                    "422": _ack("id_reused: the key was used for another command"),
                    "429": _ack("rate_limited", **{"Retry-After": RETRY_AFTER}),
                    "503": _ack("unavailable: storage failed, nothing applied", **{"Retry-After": RETRY_AFTER}),
                },
            },
        },
        "/api/uploads": UPLOADS,
        "/api/uploads/{upload}": UPLOADED_FILE,
        "/api/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This document",
                "security": [],
                "responses": {
                    "200": {
                        "description": "the OpenAPI document",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            },
        },
    },
    "components": {
        "securitySchemes": {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "an API token (python manage.py messaging_token USERNAME, or the admin)",
            },
            "session": {"type": "apiKey", "in": "cookie", "name": "sessionid"},
            "csrf": {
                "type": "apiKey",
                "in": "header",
                "name": "X-CSRFToken",
                "description": "the csrftoken cookie's value, with the session cookie",
            },
        },
        "schemas": {"Ack": ACK, "Error": ERROR, "ErrorFrame": ERROR_FRAME, "Upload": UPLOAD},
    },
}


def document() -> dict[str, Any]:
    """`DOCUMENT` with the command types registered in this process (a host's own included) as `t`'s values."""
    served = copy.deepcopy(DOCUMENT)
    body = served["paths"]["/api/commands"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    body["properties"]["t"]["enum"] = sorted(handlers.registered())
    # The types clients' outboxes send one at a time per lane, in order (`Handler.lane`).
    served["x-messaging-lanes"] = handlers.lanes()
    return served
