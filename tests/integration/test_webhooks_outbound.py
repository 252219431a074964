"""Where a webhook may go (PROTOCOL 1.2, "Outbound requests"), and how it is signed (Standard Webhooks),
against real local HTTP(S) servers: a redirect is a failed attempt, never followed; an endpoint on a
loopback, private, link-local or unspecified address is refused when saved and when delivered to."""

from __future__ import annotations

import datetime
import hashlib
import hmac
import ipaddress
import ssl
import time
import uuid

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.core.exceptions import ValidationError
from standardwebhooks import Webhook, WebhookVerificationError

from messaging.events import outbound, webhooks
from messaging.events.models import DeadLetter, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from messaging.events.signatures import standard_secret

from ..support.http_servers import Recorder, redirector
from ..support.webhooks import SECRET, Receiver

pytestmark = [pytest.mark.django_db(transaction=True)]

# Each a way to reach this machine or its private network; the port is one nothing listens on.
PRIVATE = [
    "http://127.0.0.1:9/hook",
    "http://10.1.2.3/hook",
    "http://169.254.169.254/latest/meta-data",
    "http://[::1]:9/hook",
    "http://localhost:9/hook",
    "http://0.0.0.0:9/hook",
    "http://100.64.0.1/hook",
    "http://[::ffff:127.0.0.1]:9/hook",
    "http://192.168.1.1/hook",
    "http://[fe80::1]/hook",
]


def allow_private(settings, allowed: bool) -> None:
    settings.MESSAGING = {
        **settings.MESSAGING,
        "WEBHOOKS_ALLOW_PRIVATE": allowed,
        "WEBHOOK_TIMEOUT": 2.0,
        "WEBHOOK_BACKOFF": 0.01,
    }


def event() -> dict:
    return {
        "event_id": str(uuid.uuid4()),
        "type": "message.posted",
        "room": "lobby",
        "data": {"room": "lobby", "seq": 1, "body": "hi"},
    }


def attempt_all_now() -> None:
    """One attempt of every pending delivery, due or not."""
    WebhookDelivery.objects.filter(state="pending").update(next_attempt_at=webhooks.timezone.now())
    webhooks.deliver_due(limit=100)


@pytest.mark.parametrize("status", [301, 302, 303])
def test_a_redirect_is_a_failed_attempt_retried_and_never_followed(settings, status):
    allow_private(settings, True)  # both servers are local; what is tested is the redirect
    settings.MESSAGING = {**settings.MESSAGING, "WEBHOOK_MAX_ATTEMPTS": 2}
    elsewhere = Recorder(200)
    endpoint_server = redirector(elsewhere.url, status)
    try:
        endpoint = WebhookEndpoint.objects.create(url=endpoint_server.url, secret=SECRET)
        webhooks.enqueue(event())
        attempt_all_now()
        [delivery] = WebhookDelivery.objects.all()
        assert delivery.state == "pending" and delivery.attempts == 1  # failed, to be retried
        attempt_all_now()
        delivery.refresh_from_db()
        assert delivery.state == "dead" and delivery.attempts == 2
        assert [r["method"] for r in endpoint_server.requests] == ["POST", "POST"]
        assert elsewhere.requests == []
        attempts = list(WebhookAttempt.objects.order_by("at").values_list("status", "error"))
        assert [a[0] for a in attempts] == [status, status]
        assert all("redirect" in error and "not followed" in error for _, error in attempts)
        assert DeadLetter.objects.get().group == f"webhook:{endpoint.pk}"
    finally:
        endpoint_server.close()
        elsewhere.close()


@pytest.mark.parametrize("url", PRIVATE)
def test_an_endpoint_on_a_private_address_is_refused_when_saved(settings, url):
    allow_private(settings, False)
    with pytest.raises(ValidationError) as refused:
        WebhookEndpoint(url=url, secret="s").full_clean()
    assert "address" in str(refused.value.message_dict["url"])
    with pytest.raises(ValidationError):
        WebhookEndpoint.objects.create(url=url, secret="s")
    assert not WebhookEndpoint.objects.exists()
    allow_private(settings, True)
    WebhookEndpoint.objects.create(url=url, secret="s")


def test_the_admin_refuses_a_private_endpoint_and_saves_a_public_one(settings, client, django_user_model):
    allow_private(settings, False)
    client.force_login(django_user_model.objects.create_superuser(username="admin", password="x"))
    form = {"secret": "whsec_c2VjcmV0", "types": "[]", "active": "on"}
    answer = client.post("/admin/messaging/webhookendpoint/add/", {**form, "url": "http://169.254.169.254/x"})
    assert answer.status_code == 200 and b"link-local address" in answer.content
    assert not WebhookEndpoint.objects.exists()
    # A public address saves (nothing is sent on save: it is only resolved).
    answer = client.post("/admin/messaging/webhookendpoint/add/", {**form, "url": "http://93.184.215.14/hook"})
    assert answer.status_code == 302 and WebhookEndpoint.objects.get().url == "http://93.184.215.14/hook"


def test_an_endpoint_on_a_private_address_is_refused_when_delivered_to(settings):
    v4, v6 = Recorder(200), Recorder(200, host="::1")
    by_name = v4.url.replace("127.0.0.1", "localhost")
    urls = [v4.url, v6.url, by_name, "http://10.1.2.3:9/hook", "http://169.254.169.254:9/hook"]
    try:
        allow_private(settings, True)  # saved while allowed (or before this version); delivered after
        endpoints = [WebhookEndpoint.objects.create(url=url, secret=SECRET) for url in urls]
        allow_private(settings, False)
        webhooks.enqueue(event())
        attempt_all_now()
        assert v4.requests == [] and v6.requests == []
        errors = dict(WebhookAttempt.objects.values_list("delivery__endpoint_id", "error"))
        assert set(errors) == {e.pk for e in endpoints}
        assert all(error.startswith("refused: ") for error in errors.values()), errors
        assert "loopback" in errors[endpoints[0].pk] and "loopback" in errors[endpoints[1].pk]
        assert "localhost resolves to" in errors[endpoints[2].pk]
        assert "private" in errors[endpoints[3].pk] and "link-local" in errors[endpoints[4].pk]
        # Failed attempts, retried like any other.
        assert set(WebhookDelivery.objects.values_list("state", "attempts")) == {("pending", 1)}
        allow_private(settings, True)
        attempt_all_now()
        assert len(v4.requests) == 2 and len(v6.requests) == 1  # by address and by name
    finally:
        v4.close()
        v6.close()


def test_the_connection_goes_to_the_address_that_was_checked_under_the_urls_host_name():
    # The name does not resolve at all: the request can only have gone to the checked address.
    server = Recorder(200)
    try:
        to = outbound.Destination("http", "hooks.invalid", server.port, "/hook?a=1", ("127.0.0.1",))
        connection = outbound.connect(to, timeout=5)
        connection.request("POST", to.target, body=b"{}", headers={"Content-Type": "application/json"})
        assert connection.getresponse().status == 200
        connection.close()
        [request] = server.requests
        assert request["headers"]["Host"] == f"hooks.invalid:{server.port}" and request["path"] == "/hook?a=1"
    finally:
        server.close()


def certificate_for(name: str, tmp_path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a self-signed certificate for `name`, and a client context that trusts only it."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_path, key_path)
    return server, ssl.create_default_context(cafile=str(cert_path))


def test_https_is_verified_against_the_urls_host_name_not_the_address_connected_to(tmp_path):
    server_tls, trusting = certificate_for("localhost", tmp_path)
    server = Recorder(200, tls=server_tls)
    try:
        by_name = f"https://localhost:{server.port}/hook"
        assert outbound.post(by_name, b"{}", {}, timeout=5, allow_private=True, context=trusting) == (200, "")
        # The same server by its address: the certificate does not name 127.0.0.1.
        status, error = outbound.post(server.url, b"{}", {}, timeout=5, allow_private=True, context=trusting)
        assert status is None and "certificate verify failed" in error
        # And a name the certificate does not hold, connected to the same address.
        to = outbound.Destination("https", "other.test", server.port, "/hook", ("127.0.0.1",))
        with pytest.raises(ssl.SSLCertVerificationError):
            outbound.connect(to, timeout=5, context=trusting)
        assert len(server.requests) == 1
    finally:
        server.close()


def test_addresses_are_refused_by_kind():
    for address, kind in [
        ("127.0.0.5", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("169.254.0.1", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("::ffff:10.0.0.1", "private"),
        ("fc00::1", "private"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "non-global"),
    ]:
        assert outbound.forbidden_reason(address) == kind, address
    for address in ("93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "8.8.8.8"):
        assert outbound.forbidden_reason(address) is None
        assert ipaddress.ip_address(address).is_global


def test_a_real_delivery_verifies_with_the_standardwebhooks_library(settings):
    allow_private(settings, True)
    receiver, recorder = Receiver([]), Recorder(200)
    try:
        old = WebhookEndpoint.objects.create(url=receiver.url, secret=SECRET)  # any text, as secrets were before
        new = WebhookEndpoint.objects.create(url=recorder.url)  # a secret made for it
        assert old.secret == standard_secret(SECRET) != SECRET
        assert new.secret.startswith("whsec_") and len(new.secret) > 40
        posted = event()
        webhooks.enqueue(posted)
        attempt_all_now()
        assert set(WebhookDelivery.objects.values_list("state", flat=True)) == {"delivered"}
        [old_request], [new_request] = receiver.requests, recorder.requests
        for endpoint, other, request in ((old, new, old_request), (new, old, new_request)):
            headers, body = request["headers"], request["body"]
            assert Webhook(endpoint.secret).verify(body, headers) == posted
            with pytest.raises(WebhookVerificationError):
                Webhook(other.secret).verify(body, headers)
            assert headers["webhook-id"] == headers["Idempotency-Key"] == posted["event_id"]
            assert abs(int(headers["webhook-timestamp"]) - time.time()) < 60
        # The deprecated header still verifies with the text the receiver had: the same key.
        assert old_request["signed"]
    finally:
        receiver.close()
        recorder.close()


def test_the_migration_keeps_each_existing_secrets_key_in_the_standard_form():
    from django.core.management import call_command
    from django.db import connection

    from messaging.events.signatures import secret_key, sign

    texts = ["s", "whsec-test", "whsec_YWJj", "clé ünïcode " * 16]
    try:
        call_command("migrate", "messaging", "0020", verbosity=0)
        with connection.cursor() as cursor:
            for n, text in enumerate(texts):
                cursor.execute(
                    "INSERT INTO messaging_webhookendpoint (url, secret, types, active, created_at)"
                    " VALUES (%s, %s, '[]', true, now())",
                    [f"http://93.184.215.14/{n}", text],
                )
        call_command("migrate", "messaging", "0021", verbosity=0)
        migrated = list(WebhookEndpoint.objects.order_by("url").values_list("secret", flat=True))
        # Each the standard form of its text (even one that looked standard), the HMAC key unchanged.
        assert migrated == [
            standard_secret(t) if not t.startswith("whsec_") else "whsec_d2hzZWNfWVdKag==" for t in texts
        ]
        for text, secret in zip(texts, migrated):
            # As the version before signed with the text: receivers keep verifying.
            before = "t=1,v1=" + hmac.new(text.encode(), b"1.{}", hashlib.sha256).hexdigest()
            assert secret_key(secret) == text.encode() and sign(secret, 1, b"{}") == before
        call_command("migrate", "messaging", "0020", verbosity=0)
        with connection.cursor() as cursor:
            cursor.execute("SELECT secret FROM messaging_webhookendpoint ORDER BY url")
            assert [row[0] for row in cursor.fetchall()] == texts
    finally:
        # Every app forward: going back also unapplied the apps that depend on messaging.
        call_command("migrate", verbosity=0)
