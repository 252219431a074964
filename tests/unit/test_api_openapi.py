"""The hand-kept OpenAPI document against the view it describes."""

from __future__ import annotations

import re

import schemathesis

from messaging.transport.http import views
from messaging.transport.http.openapi import DOCUMENT, document


def test_every_status_the_view_answers_is_documented():
    responses = DOCUMENT["paths"]["/api/commands"]["post"]["responses"]
    answered = {200, 401, 405, 413, *views.STATUS.values()}
    assert answered <= {int(status) for status in responses}


def test_every_refusal_code_is_in_the_error_schema():
    assert set(views.STATUS) == set(DOCUMENT["components"]["schemas"]["Error"]["properties"]["code"]["enum"])


def test_retry_after_is_documented_where_it_is_sent():
    responses = DOCUMENT["paths"]["/api/commands"]["post"]["responses"]
    for status in ("409", "429", "503"):
        assert "Retry-After" in responses[status]["headers"]
    assert "Idempotent-Replayed" in responses["200"]["headers"]


def test_the_document_loads_as_openapi_3_with_the_registered_types():
    served = document()
    schema = schemathesis.openapi.from_dict(served)
    assert [op.ok().path for op in schema.get_all_operations()] == [
        "/api/commands",
        "/api/uploads",
        "/api/uploads/{upload}",
        "/api/openapi.json",
    ]
    types = served["paths"]["/api/commands"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert "room.post" in types["properties"]["t"]["enum"]
    # The constant itself is left as written.
    assert (
        "enum"
        not in DOCUMENT["paths"]["/api/commands"]["post"]["requestBody"]["content"]["application/json"]["schema"][
            "properties"
        ]["t"]
    )


def test_every_status_the_uploads_answer_is_documented():
    import inspect

    from messaging.transport.http import downloads, uploads

    answered = {
        int(n) for n in re.findall(r"\b([2-5]\d\d)\b", inspect.getsource(uploads) + inspect.getsource(downloads))
    }
    documented = {
        int(status)
        for path in ("/api/uploads", "/api/uploads/{upload}")
        for operation in DOCUMENT["paths"][path].values()
        for status in operation["responses"]
    }
    assert answered <= documented
