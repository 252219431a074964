from django.apps import AppConfig


class ReactionsConfig(AppConfig):
    name = "messaging.contrib.reactions"
    # Not "reactions": a host may have an app of that name.
    label = "messaging_reactions"
    verbose_name = "Messaging: reactions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # `reaction.add` and the join hook register themselves on import.
        from . import commands  # noqa: F401
