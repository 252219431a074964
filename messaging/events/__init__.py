"""Events downstream (docs/EVENTS.md): every effect's event written in the effect's
transaction (`outbox.emit`), published by `messaging_relay` to Redis Streams or
NATS JetStream, applied once per consumer group (`consumers.consume`), and the
built-in consumers: webhooks and mentions."""
