// A room's messages by (room, seq) (model/timeline.js): `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Timeline } from "../../messaging/contrib/chat/static/messaging/model/timeline.js";

const ME = 1;
const msg = (seq, { sender = 2, id = `m${seq}`, ...rest } = {}) => ({
  room: "lobby",
  seq,
  id,
  body: `body ${seq}`,
  version: 1,
  sender: { id: sender, name: `user ${sender}` },
  ...rest,
});

/** Feed `d`s as frames arrive and put in what is ready; the seqs in, in order. */
function feed(timeline, ds) {
  const gaps = [];
  for (const d of ds) {
    const { ready, gap } = timeline.receive(d);
    for (const each of ready) timeline.put(each, ME);
    if (gap) gaps.push(d.seq);
  }
  return gaps;
}

test("a repeat of a message is dropped: each seq is in once", () => {
  const timeline = new Timeline("lobby");
  feed(timeline, [msg(5), msg(6), msg(6), msg(5)]);
  assert.deepEqual(timeline.receive(msg(6)), { repeat: true, gap: false, ready: [] });
  assert.equal(timeline.messages().length, 2);
  assert.equal(timeline.shown, 6);
});

test("messages past a gap wait for it and come in seq order, and the gap asks for a rejoin", () => {
  const timeline = new Timeline("lobby");
  assert.deepEqual(feed(timeline, [msg(10), msg(13), msg(12)]), [13, 12]);
  assert.equal(timeline.shown, 10);
  assert.equal(timeline.at(12), null); // held, not shown
  const { ready, gap } = timeline.receive(msg(11));
  assert.equal(gap, false);
  assert.deepEqual(
    ready.map((d) => d.seq),
    [11, 12, 13],
  );
  assert.equal(timeline.shown, 13);
  // A held message sent again is a repeat, not a second one.
  assert.equal(timeline.receive(msg(13)).repeat, true);
});

test("the first message after a join without `since` says where the backlog starts; an empty room starts at 0", () => {
  const timeline = new Timeline("lobby");
  feed(timeline, [msg(40)]);
  assert.equal(timeline.shown, 40);
  const empty = new Timeline("lobby");
  empty.empty();
  assert.equal(empty.receive(msg(2)).gap, true);
  empty.empty(); // only ever starts once
  assert.equal(empty.shown, 0);
});

test("an own message is one from its optimistic copy to the server's msg, by command id", () => {
  const timeline = new Timeline("lobby");
  const entry = { id: "c-1", t: "room.post", d: { room: "lobby", body: "hello" } };
  const { message, made } = timeline.own(entry, ME);
  assert.equal(made, true);
  assert.equal(message.state, "sending");
  assert.equal(timeline.own(entry, ME).made, false);
  timeline.store(message, 7, "2026-01-01T00:00:00Z"); // its ack
  feed(timeline, [msg(6), msg(7, { sender: ME, id: "c-1" })]);
  assert.equal(timeline.messages().length, 2);
  assert.equal(timeline.at(7), message);
  assert.deepEqual(message.command, { t: "room.post", d: { room: "lobby", body: "hello" } });
});

test("someone else's message is keyed by seq, so the same id from another sender is another message", () => {
  const timeline = new Timeline("lobby");
  feed(timeline, [msg(1, { id: "same" }), msg(2, { id: "same", sender: 3 })]);
  assert.equal(timeline.messages().length, 2);
});

test("a state told before the message is here waits for it; one below the backlog is dropped", () => {
  const timeline = new Timeline("lobby");
  feed(timeline, [msg(3)]);
  assert.equal(timeline.tell(5, "delivered"), null);
  assert.equal(timeline.tell(5, "sent"), null); // lower: delivered stays
  assert.equal(timeline.tell(2, "read"), null); // older than what is shown
  assert.equal(timeline.tell(6, "nonsense"), null);
  const { message } = timeline.own({ id: "c-5", t: "room.post", d: { room: "lobby", body: "x" } }, ME);
  timeline.store(message, 5, null);
  assert.equal(message.state, "delivered");
  assert.equal(message.confirmed, "delivered");
  assert.equal(timeline.early.size, 0);
  assert.equal(timeline.tell(5, "read"), message);
  assert.equal(message.state, "read");
});

test("a backlog msg of an own message carries its state", () => {
  const timeline = new Timeline("lobby");
  feed(timeline, [msg(1, { sender: ME, state: "delivered" })]);
  assert.equal(timeline.at(1).confirmed, "delivered");
});

test("a failed message retried or discarded is gone, and the oldest seq is the lowest held", () => {
  const timeline = new Timeline("lobby");
  feed(timeline, [msg(8), msg(9)]);
  timeline.put(msg(3), ME); // from a history page
  assert.equal(timeline.oldestSeq(), 3);
  const { message } = timeline.own({ id: "c-9", t: "room.post", d: { room: "lobby", body: "no" } }, ME);
  timeline.forget(message);
  assert.equal(timeline.own({ id: "c-9", t: "room.post", d: { room: "lobby", body: "no" } }, ME).made, true);
});

test("a message of a user of another deployment keeps its sender's node (federation)", () => {
  const timeline = new Timeline("lobby@a");
  feed(timeline, [msg(1), msg(2)]);
  const d = msg(3, { sender: 7 });
  d.sender.node = "a";
  feed(timeline, [d]);
  const [first, second, third] = timeline.messages();
  assert.equal(third.senderNode, "a");
  assert.equal(third.senderName, "user 7");
  assert.equal(first.senderNode, null);
  assert.equal(second.senderNode, null);
});
