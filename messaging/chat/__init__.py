"""The chat: rooms, posts, receipts and message states, as command types of the core."""
