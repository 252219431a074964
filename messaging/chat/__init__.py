"""The chat: rooms, posts, receipts and message states, as command types of the core.

A message's life after its post: edits and deletes (`edits.py`, `deletes.py`,
who may make them in `permissions.py`), the room's change counter `rev`
(`revs.py`) and the replay it resumes (`replay.py`), history pages
(`history.py`) and unread counts (`unread.py`).
"""
