"""The core: the protocol, command types and their registry, and the exactly-once pipeline.

It knows nothing of Channels or of rooms: a transport hands it commands and
writes back what it answers; the chat registers its command types here.
"""
