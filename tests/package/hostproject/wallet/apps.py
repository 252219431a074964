from django.apps import AppConfig


class WalletConfig(AppConfig):
    name = "wallet"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import commands  # noqa: F401  registers wallet.credit
