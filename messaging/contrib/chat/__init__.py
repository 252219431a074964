"""The chat page: a browser client of the protocol, its templates, scripts and styles.

Add `"messaging.contrib.chat"` to `INSTALLED_APPS` and include
`messaging.contrib.chat.urls` to serve it (docs/INTEGRATION.md, section 3).
Its templates (`messaging/chat.html`) are found by Django's app loader, so a
host overrides one by putting its own under the same name in a template
directory (`TEMPLATES["DIRS"]`) or an app listed before this one.
"""
