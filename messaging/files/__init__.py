"""Files users upload (PROTOCOL.md 1.2, "Files") and post as a message's attachments.

`models.py` (`Upload`: the file's row, its key, its bytes' digest, where it
was posted), `kinds.py` (which content types a deployment takes, and whether
the bytes are of the type they say), `names.py` (the file's name as a user
gave it: what is refused), `storage.py` (the bytes, streamed to Django's
storage API and removed after the commit that lets go of them), `uploads.py`
(an upload recorded exactly once per key, within each user's bounds) and
`access.py` (who may fetch a file). Like the events' outbox, they use only
`conf` and the models: the chat's posts and deletes call them inside their
transactions, and the transport's views serve them.
"""
