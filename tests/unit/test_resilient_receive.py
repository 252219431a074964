"""A consumer subclass that listens on the channel layer survives a layer outage."""

from __future__ import annotations

import redis

from messaging.transport.consumers import ChatConsumer, resilient


async def test_a_failing_layer_receive_is_retried_not_raised(monkeypatch):
    sleeps = []

    async def no_wait(seconds):
        sleeps.append(seconds)

    monkeypatch.setattr("messaging.transport.consumers.asyncio.sleep", no_wait)
    failures = [ConnectionRefusedError(), redis.ConnectionError("gone"), redis.TimeoutError()]

    async def receive():
        if failures:
            raise failures.pop(0)
        return {"type": "room.frame"}

    assert await resilient(receive)() == {"type": "room.frame"}
    assert sleeps == [0.1, 0.2, 0.4]  # backing off, so an outage is not a busy loop


def test_the_consumer_does_not_listen_on_the_channel_layer_unless_a_subclass_asks():
    # Live frames come through the hub: a channel per socket would cost a
    # receive task and a Redis poll per socket for nothing.
    assert ChatConsumer.channel_layer_alias is None

    class WithLayer(ChatConsumer):
        channel_layer_alias = "default"

    consumer = WithLayer()
    consumer.channel_receive = lambda: None
    assert consumer.channel_receive.__name__ == "receive_until_it_works"
