// Threads and emoji reactions on the page (model/threads.js, model/emoji.js, model/room.js): `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { EmojiReactions, wantsOn } from "../../messaging/contrib/chat/static/messaging/model/emoji.js";
import { Room } from "../../messaging/contrib/chat/static/messaging/model/room.js";
import { repliesOf, takeThread, threadPage } from "../../messaging/contrib/chat/static/messaging/model/threads.js";

const d = (seq, extra = {}) => ({
  room: "r", seq, id: `m${seq}`, sender: { id: 2, name: "bob" }, body: `b${seq}`, at: "2026-12-05T00:00:00Z",
  version: 1, rev: seq, ...extra,
}); // prettier-ignore

test("replies are messages of the room with their root, in seq order, those on their way last", () => {
  const room = new Room("r", 1);
  for (const each of [d(1), d(2, { reply_to: 1 }), d(3), d(4, { reply_to: 1 }), d(5, { reply_to: 3 })]) {
    room.receive(each);
  }
  const own = room.own({ id: "c9", t: "room.post", d: { room: "r", body: "mine", reply_to: 1 } }).message;
  assert.equal(own.replyTo, 1);
  assert.deepEqual(
    repliesOf(room.timeline.messages(), 1).map((m) => m.seq ?? m.id),
    [2, 4, "c9"],
  );
  assert.equal(room.timeline.at(1).replyTo, null);
});

test("a root's count only goes up, from thread frames and stored messages alike", () => {
  const room = new Room("r", 1);
  room.receive(d(1, { replies: 2, last_reply_at: "2026-12-05T01:00:00Z" }));
  const root = room.timeline.at(1);
  assert.equal(root.replies, 2);
  assert.equal(takeThread(root, { replies: 3, last_reply_at: "2026-12-05T02:00:00Z" }), true);
  assert.equal(takeThread(root, { replies: 2 }), false);
  assert.equal(takeThread(null, { replies: 9 }), false);
  assert.deepEqual([root.replies, root.lastReplyAt], [3, "2026-12-05T02:00:00Z"]);
  assert.deepEqual(threadPage("r", 1, null), { room: "r", seq: 1, limit: 100 });
  assert.deepEqual(threadPage("r", 1, 7), { room: "r", seq: 1, after: 7, limit: 100 });
});

test("emoji counts come from frames by rev and from stored messages; the user's own from pages and acks", () => {
  const emoji = new EmojiReactions();
  assert.equal(emoji.fromMessage(d(1, { reactions: { "👍": 2, "🎉": 1 }, mine: ["🎉"] })), true);
  assert.deepEqual(emoji.of(1), [
    { emoji: "👍", count: 2, mine: false },
    { emoji: "🎉", count: 1, mine: true },
  ]);
  assert.equal(emoji.take({ seq: 1, emoji: "👍", count: 3, rev: 10 }), true);
  assert.equal(emoji.take({ seq: 1, emoji: "👍", count: 1, rev: 9 }), false, "an older frame is dropped");
  assert.equal(emoji.take({ seq: 1, emoji: "🎉", count: 0, rev: 11 }), true);
  assert.deepEqual(emoji.of(1), [{ emoji: "👍", count: 3, mine: false }]);
  emoji.acked({ seq: 1, emoji: "👍", on: true, count: 3 });
  assert.equal(emoji.mine(1, "👍"), true);
  // An ack's count stands only where no frame told one.
  emoji.acked({ seq: 2, emoji: "👀", on: true, count: 1 });
  assert.deepEqual(emoji.of(2), [{ emoji: "👀", count: 1, mine: true }]);
  // A tombstone has none.
  emoji.fromMessage(d(1, { deleted: true }));
  assert.deepEqual(emoji.of(1), []);
  assert.equal(emoji.fromMessage(d(3)), false, "a message without reactions changes nothing");
});

test("a click puts an emoji on unless it is the user's, or a toggle of it waits in the outbox", () => {
  const emoji = new EmojiReactions();
  emoji.acked({ seq: 1, emoji: "👍", on: true, count: 1 });
  assert.equal(wantsOn(emoji, [], "r", 1, "👍"), false);
  assert.equal(wantsOn(emoji, [], "r", 1, "🎉"), true);
  const pending = [{ t: "reaction.set", d: { room: "r", seq: 1, emoji: "👍", on: false } }];
  assert.equal(wantsOn(emoji, pending, "r", 1, "👍"), true);
  assert.equal(wantsOn(emoji, pending, "other", 1, "👍"), false);
});

test("a delete of a message forgets its emoji; a repeat msg with reactions redraws it", () => {
  const room = new Room("r", 1);
  room.receive(d(1));
  const again = room.receive(d(1, { reactions: { "👍": 1 }, mine: [] }));
  assert.equal(again.messages.length, 1);
  assert.deepEqual(room.emoji.of(1), [{ emoji: "👍", count: 1, mine: false }]);
  room.change(1, { version: 2 }, { deleted: true });
  assert.deepEqual(room.emoji.of(1), []);
});

test("an emoji toggle waiting in the outbox counts as a reaction, not a message", async () => {
  const { waiting, isReaction } = await import("../../messaging/contrib/chat/static/messaging/model/commands.js");
  const entries = [
    { t: "room.post", d: { room: "r", body: "a", reply_to: 1 } },
    { t: "reaction.set", d: { room: "r", seq: 1, emoji: "👍", on: true } },
  ];
  assert.deepEqual(waiting(entries), { messages: 1, changes: 0, reactions: 1 });
  assert.equal(isReaction(entries[1]), true);
});

test("seeing a message reads the replies right after it, which the room's list does not show", () => {
  const room = new Room("r", 1);
  for (const each of [d(1), d(2, { reply_to: 1 }), d(3, { reply_to: 1 }), d(4), d(5, { reply_to: 4 })]) {
    room.receive(each);
  }
  assert.equal(room.read([1]), true);
  assert.equal(room.receipts.readMark, 3);
  assert.equal(room.read([4]), true);
  assert.equal(room.receipts.readMark, 5);
});
