"""The OpenAPI 3 document of the HTTP API, kept by hand beside the view it describes.

One endpoint with a body of two fields does not need a framework to derive
it; tests/unit/test_api_openapi.py checks that it loads as OpenAPI 3 and
that every status and refusal code the view answers is in it, and the
schema-driven fuzzer (schemathesis, tests/e2e/test_api_fuzz.py) runs from it
against a live server and fails on any answer it does not describe.
"""

from __future__ import annotations

import copy

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


def _ack(description: str, **headers: dict) -> dict:
    response: dict = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Ack"}}},
    }
    if headers:
        response["headers"] = headers
    return response


def _error_frame(description: str) -> dict:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorFrame"}}},
    }


RETRY_AFTER = {"description": "whole seconds to wait before the retry", "schema": {"type": "integer", "minimum": 1}}

DOCUMENT: dict = {
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
        "schemas": {"Ack": ACK, "Error": ERROR, "ErrorFrame": ERROR_FRAME},
    },
}


def document() -> dict:
    """`DOCUMENT` with the command types registered in this process (a host's own included) as `t`'s values."""
    served = copy.deepcopy(DOCUMENT)
    body = served["paths"]["/api/commands"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    body["properties"]["t"]["enum"] = sorted(handlers.registered())
    return served
