from django.apps import AppConfig


class ChatPageConfig(AppConfig):
    name = "messaging.contrib.chat"
    # `messaging` is the core app's label; two apps may not share one.
    label = "messaging_chat"
    verbose_name = "Messaging: chat page"
