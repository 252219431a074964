from django.apps import AppConfig


class MessagingConfig(AppConfig):
    name = "messaging"
    verbose_name = "Messaging"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Built-in command types and the system checks register themselves on import.
        from .chat import (  # noqa: F401
            commands,
            deletes,
            dms,
            edits,
            emoji,
            history,
            listing,
            posts,
            private,
            search,
            threads,
            unread,
        )

        # Settings that cannot work stop the process as it starts, not at the first frame.
        from .chat.sizes import check_one_message_fits
        from .conf import get_settings
        from .events.stats import backlog
        from .federation import checks as federation_checks  # noqa: F401

        # An upload's row that goes takes its file with it (a post_delete receiver).
        from .files import storage  # noqa: F401
        from .ops import checks  # noqa: F401
        from .ops.metrics import OUTBOX

        # The outbox's backlog, read at each scrape of /metrics.
        OUTBOX.read = backlog

        # Typing, and presence, which tells the chat's member lists who is online.
        from .transport import presence, typing  # noqa: F401

        check_one_message_fits(get_settings())

        # Every garbage collection timed, the collector's thresholds, and what exists at start-up
        # frozen out of its passes (docs/OPERATIONS.md, "Loop stalls").
        from .ops.loopwatch import tune_collector

        tune_collector(get_settings())

        # Federation (docs/FEDERATION.md): `slug@node` in commands, and commands on a peer's room sent there.
        from .core.pipeline import route_with
        from .federation.addresses import install
        from .federation.routing import Router

        install()
        route_with(Router())
