// The page's connection over plain HTTP (stream.js) and when it is chosen
// (connection.js's TransportChoice), with a fake EventSource and POST:
// `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { TransportChoice } from "../../messaging/contrib/chat/static/messaging/connection.js";
import { StreamConnection, failedAck, streamUrl } from "../../messaging/contrib/chat/static/messaging/stream.js";

class FakeSource {
  constructor(url) {
    this.url = url;
    this.listeners = new Map();
    this.readyState = 0;
    this.closed = false;
  }
  addEventListener(type, listener) {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener]);
  }
  emit(type, data) {
    for (const listener of this.listeners.get(type) ?? []) listener({ data: JSON.stringify(data) });
  }
  close() {
    this.closed = true;
    this.readyState = 2;
  }
}

function connection({ answers = {} } = {}) {
  const sources = [];
  const frames = [];
  const posted = [];
  const conn = new StreamConnection({
    createSource: (url) => {
      const source = new FakeSource(url);
      sources.push(source);
      return source;
    },
    post: async (frame) => {
      posted.push(frame);
      return answers[frame.id] ?? { status: 200, ack: { t: "ack", id: frame.id, ok: true, d: {} } };
    },
    onFrame: (frame) => frames.push(frame),
  });
  return { conn, sources, frames, posted };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

test("two sockets in a row that closed without a frame choose the stream; one that delivered starts over", () => {
  const choice = new TransportChoice();
  assert.equal(choice.closed(false), false);
  assert.equal(choice.closed(true), false);
  assert.equal(choice.closed(false), false);
  assert.equal(choice.closed(false), true);
});

test("joins sent together open one stream of their rooms, acked from its ready event", async () => {
  const { conn, sources, frames } = connection();
  conn.start();
  assert.equal(conn.state, "open");
  assert.equal(conn.transport, "sse");
  assert.ok(conn.send({ id: "j1", t: "room.join", d: { room: "lobby" } }));
  assert.ok(conn.send({ id: "j2", t: "room.join", d: { room: "dev" } }));
  await tick();
  assert.equal(sources.length, 1);
  assert.equal(sources[0].url, streamUrl(["lobby", "dev"]));
  sources[0].emit("ready", { rooms: [{ room: "lobby", last_seq: 3 }, { room: "dev", last_seq: 0 }] });
  sources[0].emit("msg", { t: "msg", d: { room: "lobby", seq: 3 } });
  assert.deepEqual(frames, [
    { t: "ack", id: "j1", ok: true, d: { room: "lobby", last_seq: 3 } },
    { t: "ack", id: "j2", ok: true, d: { room: "dev", last_seq: 0 } },
    { t: "msg", d: { room: "lobby", seq: 3 } },
  ]);
});

test("a join of another room opens a stream of all of them, which replaces the old one once ready", async () => {
  const { conn, sources, frames } = connection();
  conn.start();
  conn.send({ id: "j1", t: "room.join", d: { room: "lobby" } });
  await tick();
  sources[0].emit("ready", { rooms: [{ room: "lobby" }] });
  conn.send({ id: "j2", t: "room.join", d: { room: "dev" } });
  await tick();
  assert.equal(sources[1].url, streamUrl(["lobby", "dev"]));
  // Until the new one is ready, the old one still delivers.
  sources[0].emit("msg", { t: "msg", d: { room: "lobby", seq: 1 } });
  sources[1].emit("ready", { rooms: [{ room: "lobby" }, { room: "dev" }] });
  assert.ok(sources[0].closed);
  sources[0].emit("msg", { t: "msg", d: { room: "lobby", seq: 2 } });
  sources[1].emit("msg", { t: "msg", d: { room: "lobby", seq: 2 } });
  assert.deepEqual(
    frames.map((f) => f.id ?? f.d.seq),
    ["j1", 1, "j2", 2],
  );
});

test("any other frame is posted with its id, and the answer is its ack; a failure is a retryable refusal", async () => {
  const { conn, frames, posted } = connection({ answers: { p2: { status: 503, ack: null } } });
  conn.start();
  conn.send({ id: "p1", t: "room.post", d: { room: "lobby", body: "hi" } });
  conn.send({ id: "p2", t: "room.post", d: { room: "lobby", body: "again" } });
  await tick();
  assert.deepEqual(
    posted.map((f) => f.id),
    ["p1", "p2"],
  );
  assert.deepEqual(frames, [{ t: "ack", id: "p1", ok: true, d: {} }, failedAck("p2", 503)]);
  assert.equal(failedAck("p2", 503).error.retry, true);
  assert.equal(failedAck("p3", 400).error.retry, false);
});

test("nothing is sent while offline", () => {
  const { conn } = connection();
  conn.start();
  conn.goOffline();
  assert.equal(conn.state, "offline");
  assert.equal(conn.send({ id: "p1", t: "room.post", d: {} }), false);
});
