"""Requests between peers are signed over a timestamp, both nodes' names and the body (HMAC-SHA256);
anything else is `BadSignature`."""

from __future__ import annotations

import time

import pytest

from messaging.federation.signing import (
    NODE_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    BadSignature,
    signed_headers,
    verify,
)

SECRETS = {"b": b"a-secret-of-the-pair-a-b", "c": b"a-secret-of-the-pair-a-c"}
BODY = b'{"rooms": []}'


def secret_of(name: str) -> bytes | None:
    return SECRETS.get(name)


def test_a_signed_request_names_its_sender():
    headers = signed_headers(SECRETS["b"], "b", "a", BODY)
    assert verify(headers, BODY, "a", secret_of) == "b"


@pytest.mark.parametrize(
    "tamper",
    [
        lambda h, b: (h, b + b" "),  # the body changed
        lambda h, b: ({**h, NODE_HEADER: "c"}, b),  # another peer's name
        lambda h, b: ({**h, NODE_HEADER: "z"}, b),  # no peer
        lambda h, b: ({**h, TIMESTAMP_HEADER: str(int(h[TIMESTAMP_HEADER]) + 1)}, b),
        lambda h, b: ({**h, SIGNATURE_HEADER: h[SIGNATURE_HEADER].upper()}, b),
        lambda h, b: ({k: v for k, v in h.items() if k != SIGNATURE_HEADER}, b),
        lambda h, b: ({**h, TIMESTAMP_HEADER: "soon"}, b),
    ],
)
def test_anything_changed_is_refused(tamper):
    headers, body = tamper(signed_headers(SECRETS["b"], "b", "a", BODY), BODY)
    with pytest.raises(BadSignature):
        verify(headers, body, "a", secret_of)


def test_a_request_sent_back_to_its_sender_is_refused():
    # b signed it for a; the pair's secret is the same on b, which must not take it as a's.
    headers = signed_headers(SECRETS["b"], "b", "a", BODY)
    with pytest.raises(BadSignature):
        verify({**headers, NODE_HEADER: "b"}, BODY, "b", lambda name: SECRETS["b"])


@pytest.mark.parametrize("skew", [-301, 301])
def test_five_minutes_of_tolerance(skew):
    now = time.time()
    headers = signed_headers(SECRETS["b"], "b", "a", BODY, now=now + skew)
    with pytest.raises(BadSignature, match="300"):
        verify(headers, BODY, "a", secret_of, now=now)
    inside = signed_headers(SECRETS["b"], "b", "a", BODY, now=now + skew * 299 / 301)
    assert verify(inside, BODY, "a", secret_of, now=now) == "b"
