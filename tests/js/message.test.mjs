// A message's states and versions (model/states.js, model/message.js): `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Message } from "../../messaging/contrib/chat/static/messaging/model/message.js";
import { isRanked, later } from "../../messaging/contrib/chat/static/messaging/model/states.js";

const own = () => new Message({ key: "c1", room: "lobby", id: "c1", own: true, senderId: 1, body: "hi" });

test("states rank sending < sent < delivered < read, and nothing else is ranked", () => {
  assert.equal(later("sent", "delivered"), "delivered");
  assert.equal(later("read", "delivered"), "read");
  assert.equal(later(null, "sending"), "sending");
  assert.equal(later("failed", "sent"), "sent");
  assert.equal(isRanked("read"), true);
  assert.equal(isRanked("failed"), false);
  assert.equal(isRanked("constructor"), false); // a frame's string is never looked up on a prototype
  assert.equal(isRanked(undefined), false);
});

test("a state only moves up", () => {
  const message = own();
  assert.equal(message.advance("sending"), true);
  assert.equal(message.advance("delivered"), true);
  assert.equal(message.advance("sent"), false);
  assert.equal(message.state, "delivered");
  assert.equal(message.advance("bogus"), false);
  assert.equal(message.advance("read"), true);
  assert.equal(message.advance("delivered"), false);
  assert.equal(message.state, "read");
});

test("a state the server told is never undone, even by a correction", () => {
  const message = own();
  message.confirm("delivered");
  message.advance("read"); // computed from watermarks that ran ahead
  assert.equal(message.correct("sent"), true); // a newcomer had not read it after all
  assert.equal(message.state, "delivered"); // but never below what the server said
  assert.equal(message.confirmed, "delivered");
  message.confirm("sent"); // an older `state` frame
  assert.equal(message.confirmed, "delivered");
});

test("a refused message is failed with its reason; stored, it is past failed", () => {
  const message = own();
  message.setState("sending");
  message.fail({ code: "forbidden", message: "not a member", retry: false });
  assert.equal(message.state, "failed");
  assert.equal(message.error.code, "forbidden");
  assert.equal(message.advance("sent"), true);
  assert.equal(message.error, null);
});

test("an older edit never overwrites a newer one", () => {
  const message = new Message({ key: "#4", room: "lobby", id: "x", own: false, senderId: 2, body: "v1" });
  assert.equal(message.applyVersion({ version: 1, body: "v1" }), true);
  assert.equal(message.edited, false);
  assert.equal(message.applyVersion({ version: 3, body: "v3", edited_at: "2026-01-01T00:00:00Z" }), true);
  assert.equal(message.applyVersion({ version: 2, body: "v2" }), false);
  assert.equal(message.applyVersion({ version: 3, body: "v3 again" }), false);
  assert.equal(message.body, "v3");
  assert.equal(message.version, 3);
  assert.equal(message.edited, true);
  assert.equal(message.applyVersion({ version: "4", body: "a string is no version" }), false);
});

test("a delete is final: a later frame of an older version or an edit never brings the body back", () => {
  const message = new Message({ key: "#4", room: "lobby", id: "x", own: false, senderId: 2, body: "v1" });
  message.applyVersion({ version: 1, body: "v1" });
  assert.equal(message.applyVersion({ version: 3 }, { deleted: true }), true);
  assert.equal(message.deleted, true);
  assert.equal(message.body, "");
  assert.equal(message.countsAsUnread, false);
  assert.equal(message.applyVersion({ version: 2, body: "v2" }), false);
  message.applyVersion({ version: 4, body: "back?" });
  assert.equal(message.deleted, true);
  assert.equal(message.body, "");
});
