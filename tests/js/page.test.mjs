// The page's parts without a DOM: every room and the one on screen
// (model/rooms.js), the outbox's commands (model/commands.js) and the
// requests in flight (controller/requests.js): `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Requests } from "../../messaging/contrib/chat/static/messaging/controller/requests.js";
import { changesOf, reactionsWaiting, waiting } from "../../messaging/contrib/chat/static/messaging/model/commands.js";
import { ChatModel } from "../../messaging/contrib/chat/static/messaging/model/rooms.js";

test("a room dropped is gone with its people, and the screen is left empty if it was on it", () => {
  const model = new ChatModel(1);
  const lobby = model.add("lobby");
  assert.equal(model.add("lobby"), lobby);
  model.add("side");
  model.people.room("lobby");
  model.select(lobby);
  assert.equal(lobby.unread.dividerDue, true); // opening a room draws its divider
  assert.equal(model.drop("side"), false);
  assert.equal(model.drop("lobby"), true);
  assert.equal(model.current, null);
  assert.equal(model.people.get("lobby"), null);
  assert.deepEqual([...model.rooms.keys()], []);
});

test("what waits in the outbox, by kind, and what of it belongs to one message", () => {
  const entries = [
    { t: "room.post", d: { room: "lobby", body: "a" } },
    { t: "reaction.add", d: { room: "lobby", seq: 4 } },
    { t: "reaction.add", d: { room: "lobby", seq: 4 } },
    { t: "message.edit", d: { room: "lobby", seq: 4, body: "b" } },
    { t: "message.delete", d: { room: "side", seq: 4 } },
  ];
  assert.deepEqual(waiting(entries), { messages: 1, changes: 2, reactions: 2 });
  assert.deepEqual(changesOf(entries, "lobby", 4), [entries[3]]);
  assert.equal(reactionsWaiting(entries, "lobby", 4), 2);
  assert.equal(reactionsWaiting(entries, "side", 4), 0);
});

test("a request is answered by its ack once; lost with the connection or named by an error frame", () => {
  const sent = [];
  let open = true;
  const requests = new Requests((frame) => open && sent.push(frame) > 0);
  const calls = [];
  const track = (name) => ({ answered: (ack) => calls.push([name, ack.ok]), lost: () => calls.push([name, "lost"]) });
  const a = requests.ask("room.join", { room: "lobby" }, track("a"));
  const b = requests.ask("room.history", { room: "lobby", before: 9, limit: 50 }, track("b"));
  const c = requests.ask("room.members", { room: "lobby" }, track("c"));
  assert.deepEqual(
    sent.map((frame) => [frame.id, frame.t]),
    [
      [a, "room.join"],
      [b, "room.history"],
      [c, "room.members"],
    ],
  );
  assert.equal(requests.answer({ t: "ack", id: a, ok: true, d: {} }), true);
  assert.equal(requests.answer({ t: "ack", id: a, ok: true, d: {} }), false); // answered already
  assert.equal(requests.answer({ t: "ack", id: "other", ok: true }), false);
  assert.equal(requests.failed({ t: "error", error: { code: "too_large", id: b } }), true);
  assert.equal(requests.failed({ t: "error", error: { code: "invalid" } }), false);
  requests.lost();
  assert.deepEqual(calls, [
    ["a", true],
    ["b", "lost"],
    ["c", "lost"],
  ]);
  open = false;
  assert.equal(requests.ask("typing", { room: "lobby", typing: true }), null);
  assert.equal(requests.waiting.size, 0);
});

test("the model has no DOM, no connection and no timer, and imports only the model", async () => {
  const { readdir, readFile } = await import("node:fs/promises");
  const folder = new URL("../../messaging/contrib/chat/static/messaging/model/", import.meta.url);
  const names = (await readdir(folder)).filter((name) => name.endsWith(".js"));
  assert.ok(names.length > 10);
  for (const name of names) {
    const text = await readFile(new URL(name, folder), "utf8");
    for (const [, target] of text.matchAll(/from "([^"]+)"/g)) assert.match(target, /^\.\/[a-z]+\.js$/, `${name} imports ${target}`);
    assert.doesNotMatch(text, /\b(document|window|WebSocket|EventSource|localStorage|setTimeout|setInterval)\b/, name);
  }
});
