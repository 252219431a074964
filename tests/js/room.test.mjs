// One room's rules (model/room.js with members.js, receipts.js, unread.js,
// paging.js, reactions.js): `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Room } from "../../messaging/contrib/chat/static/messaging/model/room.js";

const ME = 1;
const BOB = 2;
const CAT = 3;
const member = (user, { read = 0, delivered = read, joined = 0 } = {}) => ({
  user,
  name: `user ${user}`,
  delivered,
  read,
  joined_seq: joined,
});
const ack = (members, extra = {}) => ({ members, last_seq: 0, last_rev: 0, rev_upto: 0, replayed: 0, ...extra });
const msg = (seq, sender = BOB, extra = {}) => ({
  room: "lobby",
  seq,
  id: `m${seq}`,
  body: `body ${seq}`,
  version: 1,
  sender: { id: sender, name: `user ${sender}` },
  ...extra,
});

/** A room joined with `members`, then sent `msgs`. */
function roomWith(members, msgs = [], extra = {}) {
  const room = new Room("lobby", ME);
  room.joining = "j1";
  room.joined(ack(members, extra));
  for (const d of msgs) room.receive(d);
  return room;
}

test("a message's state is computed from its recipients' watermarks, like the server's", () => {
  const room = roomWith([member(ME), member(BOB), member(CAT)]);
  const [mine] = room.receive(msg(1, ME)).messages;
  assert.equal(mine.state, "sent");
  room.status({ room: "lobby", user: BOB, delivered: 1, read: 1 });
  assert.equal(mine.state, "sent"); // cat has not
  const { changed } = room.status({ room: "lobby", user: CAT, delivered: 1, read: 0 });
  assert.deepEqual(changed, [mine]);
  assert.equal(mine.state, "delivered");
  room.status({ room: "lobby", user: CAT, delivered: 1, read: 1 });
  assert.equal(mine.state, "read");
  // Watermarks never go back, and neither does the state.
  room.status({ room: "lobby", user: CAT, delivered: 0, read: 0 });
  assert.equal(mine.state, "read");
  assert.deepEqual(room.readersOf(mine).names, ["user 2", "user 3"]);
});

test("a join ack never moves a member's watermarks back", () => {
  const room = roomWith([member(ME), member(BOB)], [msg(1, ME), msg(2, ME)]);
  room.status({ room: "lobby", user: BOB, delivered: 2, read: 2 });
  room.joining = "j2";
  room.joined(ack([member(ME), member(BOB, { delivered: 1, read: 1 })], { last_seq: 2 })); // counted before the status
  assert.deepEqual(room.members.watermarks(BOB), { delivered: 2, read: 2 });
  assert.equal(room.timeline.at(2).state, "read");
});

test("members who joined after a message are not its recipients", () => {
  const room = roomWith([member(ME), member(BOB, { read: 1 }), member(CAT, { joined: 1 })], [msg(1, ME)]);
  assert.equal(room.timeline.at(1).state, "read");
});

test("a status of a member the page does not know asks for a rejoin, and changes nothing", () => {
  const room = roomWith([member(ME), member(BOB)], [msg(1, ME)]);
  assert.deepEqual(room.status({ room: "lobby", user: CAT, delivered: 1, read: 1 }), { known: false, changed: [] });
});

test("a rejoin listing newcomers corrects states that ran ahead, never below the server's", () => {
  const room = roomWith([member(ME), member(BOB)], [msg(1, ME), msg(2, ME)]);
  room.status({ room: "lobby", user: BOB, delivered: 2, read: 2 });
  const [first, second] = [room.timeline.at(1), room.timeline.at(2)];
  assert.equal(first.state, "read");
  room.state({ room: "lobby", seq: 2, state: "delivered" }); // the server's word
  room.joining = "j2";
  const changed = room.joined(ack([member(ME), member(BOB, { read: 2 }), member(CAT)], { last_seq: 2 }));
  assert.deepEqual(new Set(changed), new Set([first, second]));
  assert.equal(first.state, "sent");
  assert.equal(second.state, "delivered");
});

test("in a room the join ack lists only some members of, states are the server's alone", () => {
  const room = roomWith([member(ME), member(BOB, { read: 5 })], [msg(1, ME)], { members_total: 8000 });
  const mine = room.timeline.at(1);
  assert.equal(mine.state, "sent");
  assert.deepEqual(room.readersOf(mine), { partial: true, total: 8000, names: ["user 2"] });
  room.state({ room: "lobby", seq: 1, state: "read" });
  assert.equal(mine.state, "read");
});

test("a repeat brings only a newer version; an older edit or delete never overwrites a newer one", () => {
  const room = roomWith([member(ME), member(BOB)], [msg(1)]);
  const message = room.timeline.at(1);
  assert.deepEqual(room.receive(msg(1)).messages, []);
  assert.deepEqual(room.receive(msg(1, BOB, { version: 3, body: "v3" })).messages, [message]);
  assert.equal(room.change(1, { version: 2, body: "v2" }, { deleted: false }), null);
  assert.equal(message.body, "v3");
  assert.equal(room.change(1, { version: 4 }, { deleted: true }), message);
  assert.equal(room.change(1, { version: 3, body: "v3" }, { deleted: false }), null);
  assert.equal(message.deleted, true);
  assert.equal(room.change(9, { version: 9 }, { deleted: true }), null); // not held: scroll-back brings it
});

test("the unread count adds what came after the server counted, and falls as the user reads", () => {
  const room = roomWith([member(ME, { read: 2 }), member(BOB)], [], {
    unread: 3,
    first_unread: 3,
    last_seq: 5,
  });
  assert.equal(room.unreadCount(), 3);
  room.receive(msg(6));
  room.receive(msg(7, ME)); // one's own is never unread
  assert.equal(room.unreadCount(), 4);
  room.change(6, { version: 2 }, { deleted: true }); // nor a deleted one
  assert.equal(room.unreadCount(), 3);
  assert.equal(room.read([7]), true);
  assert.equal(room.unreadCount(), 0);
  assert.equal(room.read([6]), false); // the read mark never goes back
});

test("the read mark counts only messages shown: one past a gap is not read", () => {
  const room = roomWith([member(ME), member(BOB)], [msg(1), msg(3)], { last_seq: 1 });
  assert.equal(room.read([3]), false);
  assert.equal(room.read([1]), true);
});

test("the divider goes above the first unread, once per opening, after the join's backlog is in", () => {
  const room = new Room("lobby", ME);
  room.unread.opened();
  assert.equal(room.divider(), undefined); // not counted yet
  room.joining = "j1";
  room.joined(ack([member(ME, { read: 1 }), member(BOB)], { unread: 2, first_unread: 2, last_seq: 3, rev_upto: 3, replayed: 3 }));
  assert.equal(room.divider(), undefined); // the backlog is still on its way
  for (const seq of [1, 2, 3]) {
    room.cursor.take(seq);
    room.receive(msg(seq));
  }
  assert.deepEqual(room.divider(), { seq: 2 });
  assert.equal(room.divider(), undefined); // once
  room.unread.opened();
  room.read([3]);
  assert.deepEqual(room.divider(), { seq: null }); // nothing unread: no divider
});

test("the divider goes above the server's first unread when the page does not hold it, else the lowest held", () => {
  const room = roomWith([member(ME, { read: 2 }), member(BOB)], [], { unread: 8, first_unread: 3, last_seq: 10 });
  for (const seq of [9, 10]) room.older(msg(seq)); // only the newest are held
  room.unread.opened();
  assert.deepEqual(room.divider(), { seq: 3 });
  room.receive(msg(11));
  room.read([11]); // read past it: nothing unread
  room.unread.opened();
  assert.deepEqual(room.divider(), { seq: null });
});

test("receipts report delivered up to what is shown and read up to the read mark, once, and again after a refusal", () => {
  const room = roomWith([member(ME, { delivered: 1, read: 1 }), member(BOB)], [msg(1), msg(2), msg(3)], { last_seq: 1 });
  room.read([2]);
  const d = room.receiptDue();
  assert.deepEqual(d, { room: "lobby", delivered: 3, read: 2 });
  room.receiptSent(d);
  assert.equal(room.receiptDue(), null);
  room.receipts.refused();
  assert.deepEqual(room.receiptDue(), { room: "lobby", delivered: 3, read: 2 });
  room.joining = "j2"; // a join's ack will say what the server has
  assert.equal(room.receiptDue(), null);
});

test("a reaction count only grows, whatever order acks and frames come in", () => {
  const room = roomWith([member(ME), member(BOB)], [msg(1)]);
  assert.equal(room.reacted(1, 3), true);
  assert.equal(room.reacted(1, 2), false);
  assert.equal(room.reacted(1, 3), false);
  assert.equal(room.reacted(1, "4"), false);
  assert.equal(room.reactions.of(1), 3);
  assert.equal(room.reactions.of(2), 0);
});

test("scroll-back asks one page at a time before the oldest held, until the server says there is no more", () => {
  const room = roomWith([member(ME), member(BOB)], [msg(120), msg(121)], { last_seq: 121 });
  assert.equal(room.mayHaveOlder(), true);
  const d = room.nextPage();
  assert.deepEqual(d, { room: "lobby", before: 120, limit: 50 });
  room.paging.sent();
  assert.equal(room.nextPage(), null); // one in flight
  room.lost(); // its answer will not come: it may be asked again
  assert.deepEqual(room.nextPage(), d);
  room.paging.sent();
  for (let seq = 100; seq < 120; seq += 1) room.older(msg(seq));
  assert.equal(room.older(msg(119)), null); // held already
  room.paging.answered(true); // a short page: more to come
  assert.deepEqual(room.nextPage(), { room: "lobby", before: 100, limit: 50 });
  room.paging.sent();
  room.paging.answered(false);
  assert.equal(room.mayHaveOlder(), false);
  assert.equal(room.nextPage(), null);
});

test("a room whose oldest message is the first has nothing older to ask for", () => {
  const room = roomWith([member(ME), member(BOB)], [msg(1)]);
  assert.equal(room.mayHaveOlder(), false);
  assert.equal(room.nextPage(), null);
});
