"""The consumer group's contract (messaging/events/consumers.py `GroupApplier`), run by every group the app
ships: `Consumer` on a Redis stream and `NatsConsumer` on NATS JetStream, each reading what the matching
sink published.

Each `event_id` is applied once per group, however often it is delivered
and however many consumers the group has; each group applies every event;
a handler that fails is retried after `claim_after`, and after
`EVENTS_MAX_ATTEMPTS` deliveries the event goes to the dead letters. `run`
consumes until `stop`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter

import nats
import orjson
import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from messaging.backends import GROUPS, group_path
from messaging.conf import get_settings
from messaging.events.consumers import consume, outside_database
from messaging.events.models import DeadLetter, InboxRecord
from messaging.events.nats import subject
from messaging.events.settings import configured_sink
from messaging.events.sinks import Entry, entry

from .conftest import using

pytestmark = [pytest.mark.django_db(transaction=True)]

# Long enough for what will come; the tests wait for what they expect, never a fixed time.
PATIENCE = 60.0


@pytest.fixture(params=["redis", "nats"])
def kind(request, settings):
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        using(settings, EVENTS_URL=url, EVENTS_STREAM=f"contract:{uuid.uuid4()}", EVENTS_MAX_ATTEMPTS=3)
    else:
        using(settings, EVENTS_URL=request.getfixturevalue("nats_server").url, EVENTS_MAX_ATTEMPTS=3)
    assert group_path(get_settings()) == GROUPS[request.param]
    return request.param


class Applied:
    """A handler that keeps the events of one room it was given, and fails as told."""

    def __init__(self, room: str, *, fail: dict[str, int] | None = None) -> None:
        self.room = room
        self.fail = fail or {}  # event_id: deliveries that fail first
        self.calls: Counter[str] = Counter()
        self.applied: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, event: dict) -> None:
        if event["room"] != self.room:
            return  # another test's, on a stream the tests share
        with self.lock:
            self.calls[event["event_id"]] += 1
            if self.calls[event["event_id"]] <= self.fail.get(event["event_id"], 0):
                raise RuntimeError("the handler failed")
            self.applied.append(event["event_id"])


class Running:
    """Consumers of groups, each run in a thread of its own until stopped."""

    def __init__(self) -> None:
        self.consumers: list = []
        self.threads: list[threading.Thread] = []

    def start(self, handler, group: str):
        consumer = consume(handler, group=group, claim_after=1.0, block=0.2)

        def run() -> None:
            try:
                consumer.run()
            finally:
                connections.close_all()  # this thread's, used by a consumer that applies here

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.consumers.append(consumer)
        self.threads.append(thread)
        return consumer

    def stop(self) -> None:
        for consumer in self.consumers:
            consumer.stop()
        for thread in self.threads:
            thread.join(PATIENCE)
            assert not thread.is_alive(), "run returns once stopped"


@pytest.fixture
def running(kind):
    consumers = Running()
    yield consumers
    consumers.stop()


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"waited in vain for {what}"
        time.sleep(0.05)


def publish(entries: list[Entry]) -> None:
    async def go() -> None:
        sink = configured_sink()
        try:
            await sink.publish(entries)
        finally:
            await sink.aclose()

    async_to_sync(go)()


def publish_again(kind: str, entries: list[Entry]) -> None:
    """The same events once more, as a relay that published them and died before marking them would."""
    if kind == "redis":
        publish(entries)
        return

    async def go() -> None:
        # JetStream drops a repeat of a message id within its window: the repeat as another message.
        client = await nats.connect(get_settings().EVENTS_URL)
        js = client.jetstream()
        for item in entries:
            await js.publish(subject(item["room"]), orjson.dumps(item), headers={"Nats-Msg-Id": str(uuid.uuid4())})
        await client.close()

    async_to_sync(go)()


def events(room: str, count: int) -> list[Entry]:
    return [entry(uuid.uuid4(), "message.posted", room, {"n": n}) for n in range(count)]


def new_room() -> str:
    return f"r-{uuid.uuid4().hex[:12]}"


def group() -> str:
    return f"g-{uuid.uuid4().hex[:12]}"


def test_each_event_is_applied_once_in_the_order_published(running):
    room = new_room()
    published = events(room, 30)
    publish(published)
    handler = Applied(room)
    name = group()
    running.start(handler, name)
    wait_until(lambda: len(handler.applied) == 30, "30 events")
    assert handler.applied == [e["event_id"] for e in published]
    ids = [e["event_id"] for e in published]
    assert InboxRecord.objects.filter(group=name, event_id__in=ids).count() == 30


def test_every_group_applies_every_event_and_two_consumers_of_one_group_share_them(running):
    room = new_room()
    published = events(room, 40)
    shared, alone = Applied(room), Applied(room)
    name = group()
    running.start(shared, name)
    running.start(shared, name)
    running.start(alone, group())
    publish(published)
    wait_until(lambda: len(shared.applied) >= 40 and len(alone.applied) >= 40, "both groups")
    ids = {e["event_id"] for e in published}
    assert sorted(shared.applied) == sorted(ids), "once each in the group of two consumers"
    assert alone.applied == [e["event_id"] for e in published]


def test_an_event_delivered_again_is_applied_once(kind, running):
    room = new_room()
    published = events(room, 5)
    publish(published)
    publish_again(kind, published)
    marker = events(room, 1)
    publish(marker)
    handler = Applied(room)
    running.start(handler, group())
    wait_until(lambda: marker[0]["event_id"] in handler.applied, "the marker after the repeats")
    assert handler.applied == [e["event_id"] for e in published + marker]


def test_an_outside_the_database_handler_is_run_once_per_event(kind, running):
    room = new_room()
    published = events(room, 5)
    publish(published)
    publish_again(kind, published)
    marker = events(room, 1)
    publish(marker)
    handler = Applied(room)
    running.start(outside_database(handler), group())
    wait_until(lambda: marker[0]["event_id"] in handler.applied, "the marker after the repeats")
    assert handler.applied == [e["event_id"] for e in published + marker]


def test_a_failed_event_is_delivered_again_and_applied_once(running):
    room = new_room()
    published = events(room, 3)
    failing = published[1]["event_id"]
    handler = Applied(room, fail={failing: 1})
    running.start(handler, group())
    publish(published)
    wait_until(lambda: failing in handler.applied, "the failed event again")
    assert Counter(handler.applied) == Counter(e["event_id"] for e in published)
    assert handler.calls[failing] == 2


def test_an_event_that_always_fails_goes_to_the_dead_letters_after_the_attempts(running):
    room = new_room()
    published = events(room, 2)
    poison = published[0]["event_id"]
    handler = Applied(room, fail={poison: 1000})
    name = group()
    running.start(handler, name)
    publish(published)
    wait_until(lambda: DeadLetter.objects.filter(group=name, event_id=poison).exists(), "the dead letter")
    letter = DeadLetter.objects.get(group=name, event_id=poison)
    assert letter.attempts == 3 and "the handler failed" in letter.error
    assert handler.calls[poison] == 3
    assert handler.applied == [published[1]["event_id"]]


class HostGroup:
    """A host's own group, named by its dotted path."""

    @classmethod
    def from_settings(cls, conf, *, url, group, handler, name=None, claim_after=30.0, stream=None, block=1.0):
        made = cls()
        made.options = {"url": url, "group": group, "claim_after": claim_after}
        return made

    def run(self) -> None:
        pass

    def stop(self) -> None:
        pass


def test_a_host_names_its_own_group_by_its_dotted_path(settings):
    using(settings, EVENTS_GROUP=f"{__name__}.HostGroup", EVENTS_URL="kafka://somewhere")
    made = consume(print, group="g", claim_after=5.0)
    assert isinstance(made, HostGroup)
    assert made.options == {"url": "kafka://somewhere", "group": "g", "claim_after": 5.0}


def test_a_path_to_no_group_names_what_it_lacks(settings):
    using(settings, EVENTS_GROUP="messaging.events.sinks.Entry")
    with pytest.raises(ImproperlyConfigured, match="EVENTS_GROUP.*has no from_settings, run, stop"):
        consume(print, group="g")
