"""Webhook secrets in the Standard Webhooks form: `whsec_` + base64 of the key's bytes.

Every secret kept before was used as the UTF-8 bytes of its text (the key of
`Messaging-Signature`). Each becomes `whsec_` + base64 of those bytes: the
same key, so receivers that check `Messaging-Signature` with the secret they
have keep verifying, and those that switch to Standard Webhooks take the new
form from the admin. All of them, even one that looked like `whsec_...`
already: it was used as its text. Going back turns each into its text again.
"""

import base64

import messaging.events.signatures
from django.db import migrations, models


def to_standard_form(apps, schema_editor):
    WebhookEndpoint = apps.get_model("messaging", "WebhookEndpoint")
    for endpoint in WebhookEndpoint.objects.only("pk", "secret"):
        endpoint.secret = "whsec_" + base64.b64encode(endpoint.secret.encode()).decode()
        endpoint.save(update_fields=["secret"])


def to_text_form(apps, schema_editor):
    WebhookEndpoint = apps.get_model("messaging", "WebhookEndpoint")
    for endpoint in WebhookEndpoint.objects.only("pk", "secret"):
        try:
            endpoint.secret = base64.b64decode(endpoint.secret.removeprefix("whsec_")).decode()
        except UnicodeDecodeError:
            # A new endpoint's random key has no text form: kept as it is, its receivers need a new secret.
            continue
        endpoint.save(update_fields=["secret"])


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0020_drop_receipt_functions_v1_to_v3"),
    ]

    operations = [
        migrations.AlterField(
            model_name="webhookendpoint",
            name="secret",
            field=models.CharField(
                default=messaging.events.signatures.new_secret,
                help_text="whsec_ and the key in base64 (Standard Webhooks); any other text is kept as whsec_ and the base64 of its UTF-8 bytes, the same key.",
                max_length=1100,
            ),
        ),
        migrations.AlterField(
            model_name="webhookendpoint",
            name="url",
            field=models.URLField(help_text="Where the events are POSTed: a public http(s) address.", max_length=500),
        ),
        migrations.RunPython(to_standard_form, to_text_form),
    ]
