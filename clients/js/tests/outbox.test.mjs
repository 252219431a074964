// Fast tests of the outbox module, as the npm package ships it (packed.mjs): `node --test
// clients/js/tests/` (run by `make test`).
// Time is a manual clock and the socket is scripted, so backoffs and ack
// timeouts are stepped through exactly; IndexedDB itself is exercised by
// tests/browser (a reload keeps the outbox).
import assert from "node:assert/strict";
import { test } from "node:test";

import { importPackage } from "./packed.mjs";

const { backoffDelay, Connection, Outbox, timeOrderedId } = await importPackage();

class Clock {
  constructor() {
    this.time = 1_000_000;
    this.timers = new Map();
    this.next = 1;
  }
  now() {
    return this.time;
  }
  setTimeout(fn, ms) {
    const handle = this.next++;
    this.timers.set(handle, { at: this.time + ms, fn });
    return handle;
  }
  clearTimeout(handle) {
    this.timers.delete(handle);
  }
  /** Move time forward, running every timer that falls due, in order. */
  advance(ms) {
    const end = this.time + ms;
    for (;;) {
      const due = [...this.timers.entries()].filter(([, t]) => t.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.timers.delete(due[0]);
      this.time = due[1].at;
      due[1].fn();
    }
    this.time = end;
  }
}

/** The store's contract in memory; `copy()` is what a reload would find. */
class MemoryStore {
  constructor(entries = []) {
    this.outbox = new Map(entries.map((e) => [e.id, structuredClone(e)]));
    this.failedEntries = new Map();
  }
  async all() {
    return [...this.outbox.values()].map((e) => structuredClone(e)).sort((a, b) => a.order - b.order);
  }
  async put(entry) {
    this.outbox.set(entry.id, structuredClone(entry));
  }
  async delete(id) {
    this.outbox.delete(id);
  }
  async fail(entry) {
    this.outbox.delete(entry.id);
    this.failedEntries.set(entry.id, structuredClone(entry));
  }
  copy() {
    return new MemoryStore([...this.outbox.values()]);
  }
}

function makeOutbox({ store = new MemoryStore(), clock = new Clock(), connected = true } = {}) {
  const sent = [];
  const events = [];
  let ids = 0;
  const outbox = new Outbox({
    store,
    timers: clock,
    random: () => 0.5,
    mintId: () => `id-${++ids}`,
    transmit: (frame) => {
      if (!outbox.connected) return false;
      sent.push(frame);
      return true;
    },
    onChange: (event) => events.push(event),
  });
  outbox.connected = connected;
  return { outbox, store, clock, sent, events };
}

const post = (body) => ["room.post", { room: "lobby", body }];

test("ids are UUIDs of version 7: the time in milliseconds first, so later ids sort after earlier ones", () => {
  const shape = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  const at = Date.UTC(2026, 11, 1, 23, 59, 59, 999);
  const id = timeOrderedId(at, new Uint8Array(10).fill(0xff));
  assert.match(id, shape);
  assert.equal(parseInt(id.replace(/-/g, "").slice(0, 12), 16), at);
  assert.match(timeOrderedId(at, new Uint8Array(10)), shape, "the version and variant bits are set over any random bits");
  const earlier = timeOrderedId(at - 1, new Uint8Array(10).fill(0xff));
  assert.ok(earlier < timeOrderedId(at, new Uint8Array(10)), "a millisecond later sorts later, whatever the random bits");
  const many = new Set(Array.from({ length: 10000 }, () => timeOrderedId()));
  assert.equal(many.size, 10000);
  for (const one of many) assert.match(one, shape);
});

test("an outbox mints time-ordered ids unless told otherwise", async () => {
  const outbox = new Outbox({ store: new MemoryStore(), transmit: () => true, timers: new Clock() });
  await outbox.resume();
  const entry = await outbox.submit(...post("hi"));
  assert.match(entry.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
});

test("an action begun earlier brings its own id: it is used once, and a second submit of it adds nothing", async () => {
  const { outbox, store, sent } = makeOutbox();
  await outbox.resume();
  const first = await outbox.submit("room.post", { room: "lobby", body: "", attachments: ["u1"] }, { id: "minted-with-the-file" });
  assert.equal(first.id, "minted-with-the-file");
  // A reload that had not yet dropped the file's record submits it again: still one entry, one send.
  const again = await outbox.submit("room.post", { room: "lobby", body: "", attachments: ["u1"] }, { id: "minted-with-the-file" });
  assert.equal(again.id, first.id);
  assert.equal(outbox.size, 1);
  assert.equal((await store.all()).length, 1);
  assert.deepEqual(sent.map((frame) => frame.id), ["minted-with-the-file"]);
});

test("full jitter stays within [0, min(cap, base * 2^attempt))", () => {
  assert.equal(backoffDelay(0, { random: () => 0 }), 0);
  assert.equal(backoffDelay(0, { random: () => 0.999 }), 0.999 * 500);
  assert.equal(backoffDelay(3, { random: () => 0.5 }), 0.5 * 4000);
  assert.equal(backoffDelay(6, { random: () => 1 }), 30000);
  assert.equal(backoffDelay(40, { random: () => 1 }), 30000);
  const delays = Array.from({ length: 2000 }, () => backoffDelay(4));
  assert.ok(delays.every((d) => d >= 0 && d < 8000));
  // Jitter, not a fixed step: the delays spread over the whole range.
  assert.ok(Math.min(...delays) < 1000 && Math.max(...delays) > 7000);
});

test("an action is stored as sending before its first send, and its id is minted once", async () => {
  const { outbox, store, sent } = makeOutbox();
  store.put = async (entry) => {
    assert.equal(sent.length, 0, "stored before it is sent");
    assert.equal(entry.state, "sending");
    MemoryStore.prototype.put.call(store, entry);
  };
  await outbox.resume();
  const entry = await outbox.submit(...post("hi"));
  assert.deepEqual(sent, [{ id: entry.id, t: "room.post", d: { room: "lobby", body: "hi" } }]);
  assert.deepEqual((await store.all()).map((e) => e.id), [entry.id]);
});

test("an ack timeout resends with the same id, again and again until acked", async () => {
  const { outbox, clock, sent, store } = makeOutbox();
  await outbox.resume();
  const { id } = await outbox.submit(...post("hi"));
  clock.advance(4999);
  assert.equal(sent.length, 1);
  clock.advance(1);
  assert.equal(sent.length, 2);
  clock.advance(5000);
  assert.deepEqual(sent.map((f) => f.id), [id, id, id]);
  assert.equal(await outbox.handleAck({ t: "ack", id, ok: true, dup: true, d: {} }), true);
  clock.advance(60000);
  assert.equal(sent.length, 3);
  assert.equal(outbox.size, 0);
  assert.deepEqual(await store.all(), []);
});

const ok = (id) => ({ t: "ack", id, ok: true, dup: false, d: {} });

test("while disconnected nothing is sent; resume sends every pending entry in order, one at a time", async () => {
  const { outbox, clock, sent } = makeOutbox({ connected: false });
  const entries = [];
  for (const body of ["one", "two", "three"]) entries.push(await outbox.submit(...post(body)));
  clock.advance(20000);
  assert.deepEqual(sent, []);
  outbox.connected = true;
  await outbox.resume();
  assert.deepEqual(sent.map((f) => f.d.body), ["one"]);
  // A second reconnect before any ack: the same first entry, same id.
  outbox.pause();
  await outbox.resume();
  assert.deepEqual(sent.map((f) => f.id), [entries[0].id, entries[0].id]);
  await outbox.handleAck(ok(entries[0].id));
  await outbox.handleAck(ok(entries[0].id)); // the second copy's ack changes nothing
  await outbox.handleAck(ok(entries[1].id));
  assert.deepEqual(sent.slice(2).map((f) => f.id), [entries[1].id, entries[2].id]);
  assert.deepEqual(sent.map((f) => f.d.body), ["one", "one", "two", "three"]);
});

test("rooms do not wait for each other", async () => {
  const { outbox, sent } = makeOutbox();
  await outbox.resume();
  await outbox.submit("room.post", { room: "a", body: "a1" });
  await outbox.submit("room.post", { room: "a", body: "a2" });
  await outbox.submit("room.post", { room: "b", body: "b1" });
  assert.deepEqual(sent.map((f) => f.d.body), ["a1", "b1"]);
});

// Reactions ("+1", reaction.add) --------------------------------------------

const react = (seq, room = "lobby") => ["reaction.add", { room, seq }];

test("a reaction is stored as sending before its first send, resent with its id, and leaves on its ack", async () => {
  const { outbox, store, clock, sent, events } = makeOutbox();
  store.put = async (entry) => {
    assert.equal(sent.length, 0, "stored before it is sent");
    MemoryStore.prototype.put.call(store, entry);
  };
  await outbox.resume();
  const { id } = await outbox.submit(...react(3));
  assert.deepEqual(await store.all(), [{ id, t: "reaction.add", d: { room: "lobby", seq: 3 }, state: "sending", order: clock.now() }]);
  clock.advance(5000); // ack timeout
  outbox.pause(); // and a reconnect
  await outbox.resume();
  assert.deepEqual(sent, Array(3).fill({ id, t: "reaction.add", d: { room: "lobby", seq: 3 } }));
  const ack = { t: "ack", id, ok: true, dup: true, d: { room: "lobby", seq: 3, count: 4 } };
  assert.equal(await outbox.handleAck(ack), true);
  const { type, entry, ack: handed } = events.at(-1);
  assert.deepEqual([type, entry.id, entry.d, handed], ["acked", id, { room: "lobby", seq: 3 }, ack]);
  assert.equal(outbox.size, 0);
  assert.deepEqual(await store.all(), []);
  clock.advance(60000);
  assert.equal(sent.length, 3);
});

test("reactions pending across a reload are resent with their ids", async () => {
  const first = makeOutbox({ connected: false });
  const ids = [];
  for (const seq of [1, 1, 2]) ids.push((await first.outbox.submit(...react(seq))).id);
  assert.equal(new Set(ids).size, 3, "each click its own id");
  const second = makeOutbox({ store: first.store.copy() });
  await second.outbox.resume();
  assert.deepEqual(second.sent.map((f) => [f.id, f.d.seq]), [[ids[0], 1], [ids[1], 1], [ids[2], 2]]);
});

test("reactions neither wait behind a stuck post nor hold one up", async () => {
  const { outbox, clock, sent } = makeOutbox();
  await outbox.resume();
  const stuck = await outbox.submit(...post("stuck"));
  await outbox.handleAck({ t: "ack", id: stuck.id, ok: false, error: { code: "in_progress", message: "", retry: true } });
  const clicks = [await outbox.submit(...react(1)), await outbox.submit(...react(1))];
  // Both clicks go at once, the post's retry is not due yet.
  assert.deepEqual(sent.map((f) => f.id), [stuck.id, clicks[0].id, clicks[1].id]);
  const next = await outbox.submit(...post("next"));
  assert.equal(sent.length, 3, "posts still go one at a time");
  await outbox.handleAck(ok(stuck.id));
  assert.deepEqual(sent.map((f) => f.id), [stuck.id, clicks[0].id, clicks[1].id, next.id]);
  // Reactions never acked hold nothing: another post goes as soon as the last one leaves.
  clock.advance(1);
  await outbox.handleAck(ok(next.id));
  const last = await outbox.submit(...post("last"));
  assert.equal(sent.at(-1).id, last.id);
  assert.equal(outbox.size, 3);
});

test("pause stops the ack timers: a dead socket is not written to", async () => {
  const { outbox, clock, sent } = makeOutbox();
  await outbox.resume();
  await outbox.submit(...post("hi"));
  outbox.pause();
  clock.advance(60000);
  assert.equal(sent.length, 1);
});

test("a refusal with retry: false takes the entry out of the outbox as failed", async () => {
  const { outbox, store, events, clock, sent } = makeOutbox();
  await outbox.resume();
  const { id } = await outbox.submit(...post("hi"));
  const error = { code: "forbidden", message: "join the room first", retry: false };
  await outbox.handleAck({ t: "ack", id, ok: false, error });
  assert.equal(outbox.size, 0);
  assert.deepEqual(await store.all(), []);
  assert.deepEqual(store.failedEntries.get(id).error, error);
  assert.deepEqual(events.at(-1), { type: "failed", entry: { ...store.failedEntries.get(id) } });
  clock.advance(60000);
  assert.equal(sent.length, 1);
  // A failed message holds nothing up: the next one goes.
  const next = await outbox.submit(...post("next"));
  assert.deepEqual(sent.map((f) => f.id), [id, next.id]);
});

test("a refusal with retry: true resends the same id after a backoff, and later ones wait", async () => {
  const { outbox, clock, sent } = makeOutbox();
  await outbox.resume();
  const { id } = await outbox.submit(...post("hi"));
  await outbox.handleAck({ t: "ack", id, ok: false, error: { code: "in_progress", message: "", retry: true } });
  const later = await outbox.submit(...post("later"));
  // random() is 0.5 and this was attempt 1: half of the 500 ms base.
  clock.advance(249);
  assert.equal(sent.length, 1);
  clock.advance(1);
  assert.deepEqual(sent.map((f) => f.id), [id, id]);
  assert.equal(outbox.size, 2);
  await outbox.handleAck(ok(id));
  assert.deepEqual(sent.map((f) => f.id), [id, id, later.id]);
});

test("acks of other commands are not the outbox's", async () => {
  const { outbox } = makeOutbox();
  assert.equal(await outbox.handleAck({ t: "ack", id: "a-join", ok: true, d: {} }), false);
});

test("the outbox survives a reload: a new outbox on the same store resends the same ids in order", async () => {
  const first = makeOutbox({ connected: false });
  const ids = [];
  for (const body of ["a", "b"]) ids.push((await first.outbox.submit(...post(body))).id);
  await first.outbox.handleAck({ t: "ack", id: ids[0], ok: true, d: {} }); // acked before the reload

  const second = makeOutbox({ store: first.store.copy() });
  await second.outbox.resume();
  assert.deepEqual(second.sent.map((f) => [f.id, f.d.body]), [[ids[1], "b"]]);
  assert.deepEqual(second.events.map((e) => e.type), ["pending"]);
});

test("entries another tab wrote are picked up on resume, and never twice", async () => {
  const shared = new MemoryStore();
  const tabA = makeOutbox({ store: shared, connected: false });
  const tabB = makeOutbox({ store: shared });
  const { id } = await tabA.outbox.submit(...post("from a"));
  await tabB.outbox.resume();
  tabB.outbox.pause();
  await tabB.outbox.resume();
  assert.deepEqual(tabB.sent.map((f) => f.id), [id, id]);
  assert.equal(tabB.outbox.size, 1);
});

// Connection -------------------------------------------------------------

class ScriptedSocket {
  constructor(url) {
    this.url = url;
    this.sent = [];
    this.closed = false;
  }
  send(text) {
    this.sent.push(JSON.parse(text));
  }
  close() {
    this.closed = true;
  }
  open() {
    this.onopen();
  }
  receive(frame) {
    this.onmessage({ data: JSON.stringify(frame) });
  }
  drop(code = 1006) {
    this.onclose({ code });
  }
}

function makeConnection(random = () => 1) {
  const clock = new Clock();
  const sockets = [];
  const states = [];
  const log = [];
  const connection = new Connection({
    url: "ws://test/ws/",
    timers: clock,
    random,
    createSocket: (url) => {
      const socket = new ScriptedSocket(url);
      sockets.push(socket);
      return socket;
    },
    onOpen: () => log.push("open"),
    onClose: () => log.push("close"),
    onFrame: (frame) => log.push(frame),
    onState: (state, at) => states.push([state, at]),
    onUnauthorized: () => log.push("unauthorized"),
  });
  return { connection, clock, sockets, states, log };
}

test("reconnects back off exponentially up to the cap, and start over once open", () => {
  const { connection, clock, sockets, states } = makeConnection();
  connection.start();
  const delays = [];
  for (let n = 0; n < 9; n++) {
    sockets.at(-1).drop();
    const [state, at] = states.at(-1);
    assert.equal(state, "reconnecting");
    delays.push(at - clock.now());
    clock.advance(at - clock.now() - 1);
    assert.equal(sockets.length, n + 1, "no try before the time it announced");
    clock.advance(1);
    assert.equal(sockets.length, n + 2);
  }
  assert.deepEqual(delays, [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  sockets.at(-1).open();
  assert.equal(connection.state, "open");
  sockets.at(-1).drop();
  assert.equal(states.at(-1)[1] - clock.now(), 500);
});

test("frames are parsed and handed on; sending needs an open socket", () => {
  const { connection, sockets, log } = makeConnection();
  connection.start();
  assert.equal(connection.send({ id: "x" }), false);
  sockets[0].open();
  assert.equal(connection.send({ id: "x" }), true);
  assert.deepEqual(sockets[0].sent, [{ id: "x" }]);
  sockets[0].receive({ t: "msg", d: {} });
  assert.deepEqual(log, ["open", { t: "msg", d: {} }]);
});

test("offline closes the socket and stops trying; online tries at once", () => {
  const { connection, clock, sockets, log } = makeConnection();
  connection.start();
  sockets[0].open();
  connection.goOffline();
  assert.equal(connection.state, "offline");
  assert.ok(sockets[0].closed);
  assert.deepEqual(log, ["open", "close"]);
  sockets[0].drop(); // the late close event of the old socket changes nothing
  clock.advance(120000);
  assert.equal(sockets.length, 1);
  connection.goOnline();
  assert.equal(sockets.length, 2);
  assert.equal(connection.state, "reconnecting");
  sockets[1].open();
  assert.equal(connection.state, "open");
});

test("a 4401 close means signed out: no more tries", () => {
  const { connection, clock, sockets, log } = makeConnection();
  connection.start();
  sockets[0].open();
  sockets[0].drop(4401);
  clock.advance(120000);
  assert.equal(sockets.length, 1);
  assert.ok(log.includes("unauthorized"));
});

test("lanes are the server's: a type it gives a room lane waits behind the room's posts, others go at once", async () => {
  const { LANES, laneOf, servedLanes } = await importPackage();
  assert.equal(laneOf({ t: "room.post", d: { room: "lobby" } }), "room:lobby");
  assert.equal(laneOf({ t: "poll.vote", d: { room: "lobby" } }), null);
  const lanes = servedLanes(JSON.stringify({ ...LANES, "poll.vote": "room" }));
  assert.equal(laneOf({ t: "poll.vote", d: { room: "lobby" } }, lanes), "room:lobby");
  // Nothing rendered, or not lanes: the built-in types' own.
  assert.equal(servedLanes(undefined), LANES);
  assert.equal(servedLanes("[1]"), LANES);
  assert.equal(servedLanes("{"), LANES);

  const sent = [];
  const outbox = new Outbox({
    store: new MemoryStore(),
    transmit: (frame) => sent.push(frame) > 0,
    timers: new Clock(),
    lanes,
  });
  await outbox.resume();
  await outbox.submit("room.post", { room: "lobby", body: "first" });
  await outbox.submit("poll.vote", { room: "lobby", choice: 1 });
  assert.deepEqual(sent.map((frame) => frame.t), ["room.post"]);
});
