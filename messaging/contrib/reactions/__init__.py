"""The "+1" reaction, an app of its own: add `"messaging.contrib.reactions"` to
`INSTALLED_APPS` (after `"messaging"`) for `reaction.add` and the counts a join
sends; leave it out and neither exists. Built on the public extension API
only: the `command` decorator and the join hook (`messaging.on_join`).
"""
