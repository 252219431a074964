from django.apps import AppConfig


class WalletConfig(AppConfig):
    name = "wallet"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # `commands` registers wallet.credit; `signals` connects its receivers of the app's signals.
        from . import commands, signals  # noqa: F401
