// The client's outbox and its connection (PROTOCOL.md, "The client's outbox").
//
// No DOM here: the page wires these to the screen, and tests/js drives them
// in Node with a scripted socket and clock. Timers and randomness come in as
// options so the tests can step through backoffs and ack timeouts.

export const ACK_TIMEOUT_MS = 5000;
export const BACKOFF_BASE_MS = 500;
export const BACKOFF_CAP_MS = 30000;

const realTimers = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle),
};

/** Full jitter: uniform in [0, min(cap, base * 2^attempt)). */
export function backoffDelay(attempt, { base = BACKOFF_BASE_MS, cap = BACKOFF_CAP_MS, random = Math.random } = {}) {
  return random() * Math.min(cap, base * 2 ** attempt);
}

/**
 * A time-ordered command id (UUID version 7, RFC 9562): the Unix time in
 * milliseconds, then random bits, as messaging/ids.py mints them. The
 * server's indexes of ids take inserts beside the ids minted just before
 * instead of on a random page (docs/PERFORMANCE.md); any id of the
 * protocol's rules works the same.
 */
export function timeOrderedId(now = Date.now(), random = crypto.getRandomValues(new Uint8Array(10))) {
  const bytes = new Uint8Array(16);
  let time = now;
  for (let i = 5; i >= 0; i--) {
    bytes[i] = time % 256;
    time = Math.floor(time / 256);
  }
  bytes.set(random, 6);
  bytes[6] = 0x70 | (bytes[6] & 0x0f); // version 7
  bytes[8] = 0x80 | (bytes[8] & 0x3f); // variant 10
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * Pending commands, each with the id minted once for its user action.
 *
 * An entry is stored as `sending` before its first send, resent with the same
 * id after every `resume()` (a reconnect) and after each ack timeout, and
 * leaves on an `ok` ack or a refusal with `retry: false`. The store is the
 * source of truth across reloads and tabs; the map here mirrors it in order.
 *
 * Entries of one lane go one at a time, in order: the next is sent when the
 * one before it has left. Posts (with the room's edits and deletes) have a lane per room: pipelined, a later post
 * could take its seq while an earlier one is refused with `in_progress` (a
 * claim left by a server that died) or `unavailable`, and the room would show
 * them out of order. Other commands (a "+1" reaction) have no lane: what they
 * add up to does not depend on their order, so they go at once, neither
 * waiting behind a stuck post nor holding one up.
 */
export class Outbox {
  constructor({
    store,
    transmit,
    ackTimeout = ACK_TIMEOUT_MS,
    timers = realTimers,
    random = Math.random,
    mintId = () => timeOrderedId(),
    onChange = () => {},
    lanes = LANES,
  }) {
    this.store = store;
    this.transmit = transmit;
    this.ackTimeout = ackTimeout;
    this.timers = timers;
    this.random = random;
    this.mintId = mintId;
    this.onChange = onChange;
    this.lanes = lanes;
    this.entries = new Map();
    this.timeouts = new Map();
    this.ready = false;
    this.lastOrder = 0;
  }

  get size() {
    return this.entries.size;
  }

  pending() {
    return [...this.entries.values()].sort((a, b) => a.order - b.order);
  }

  /** Take in what the store holds: this tab's earlier life, or another tab's entries. */
  async load() {
    for (const entry of await this.store.all()) {
      if (!this.entries.has(entry.id)) {
        this.entries.set(entry.id, { ...entry, attempts: 0 });
        this.onChange({ type: "pending", entry });
      }
    }
  }

  /**
   * One user action: mint its id, persist it, then send it when its turn
   * comes. `id`: one minted before (an action that began earlier, such as a
   * file's upload); an entry it already names is left as it is.
   */
  async submit(t, d, { id = null } = {}) {
    if (id !== null && this.entries.has(id)) return this.entries.get(id);
    // Order by time so entries of several tabs interleave as they were made.
    const order = Math.max(this.timers.now(), this.lastOrder + 1);
    this.lastOrder = order;
    const entry = { id: id ?? this.mintId(), t, d, state: "sending", order };
    await this.store.put(entry);
    this.entries.set(entry.id, { ...entry, attempts: 0 });
    this.onChange({ type: "pending", entry });
    this.pump();
    return entry;
  }

  /** The socket is (re)joined: resend everything, in order, with the original ids. */
  async resume() {
    await this.load();
    this.ready = true;
    this.pump();
  }

  /**
   * Send the oldest entry of each lane and every entry without one, unless it
   * is already waiting for its ack or a retry.
   */
  pump() {
    if (!this.ready) return;
    const lanes = new Set();
    for (const entry of this.pending()) {
      const lane = laneOf(entry, this.lanes);
      if (lane !== null) {
        if (lanes.has(lane)) continue;
        lanes.add(lane);
      }
      if (!this.timeouts.has(entry.id)) this.send(entry.id);
    }
  }

  /** The socket is gone: nothing can be acked until the next resume(). */
  pause() {
    this.ready = false;
    for (const handle of this.timeouts.values()) this.timers.clearTimeout(handle);
    this.timeouts.clear();
  }

  send(id) {
    const entry = this.entries.get(id);
    if (!entry || !this.ready) return;
    this.clearTimer(id);
    if (!this.transmit({ id: entry.id, t: entry.t, d: entry.d })) return;
    entry.attempts += 1;
    this.timeouts.set(id, this.timers.setTimeout(() => this.expire(id), this.ackTimeout));
  }

  expire(id) {
    this.timeouts.delete(id);
    if (this.entries.has(id)) this.onChange({ type: "timeout", entry: this.entries.get(id) });
    this.send(id);
  }

  clearTimer(id) {
    if (this.timeouts.has(id)) {
      this.timers.clearTimeout(this.timeouts.get(id));
      this.timeouts.delete(id);
    }
  }

  /** Returns true when the ack was for an outbox entry (the caller ignores it otherwise). */
  async handleAck(frame) {
    const entry = this.entries.get(frame.id);
    if (!entry) return false;
    this.clearTimer(frame.id);
    if (frame.ok) {
      this.entries.delete(frame.id);
      await this.store.delete(frame.id);
      this.onChange({ type: "acked", entry, ack: frame });
      this.pump();
    } else if (frame.error && frame.error.retry === false) {
      this.entries.delete(frame.id);
      const failed = { ...strip(entry), state: "failed", error: frame.error };
      await this.store.fail(failed);
      this.onChange({ type: "failed", entry: failed });
      this.pump();
    } else {
      // in_progress, unavailable, rate_limited: the same id again, after a pause.
      const delay = backoffDelay(entry.attempts - 1, { random: this.random });
      this.timeouts.set(frame.id, this.timers.setTimeout(() => this.send(frame.id), delay));
    }
    return true;
  }
}

// A room's posts, edits and deletes share its lane: an edit waits for the
// post before it, a delete for the edit (as in messaging_client's outbox).
// The server publishes its types' lanes (the chat page's `data-lanes`, the
// OpenAPI document's `x-messaging-lanes`); these are the built-in types',
// for a client that has not read them.
export const LANES = Object.freeze({ "room.post": "room", "message.edit": "room", "message.delete": "room" });

/**
 * The lane of an entry: `room:<d.room>` for a type whose lane is "room" in
 * `lanes`; anything else has no lane (null) and is not held.
 */
export function laneOf(entry, lanes = LANES) {
  return Object.hasOwn(lanes, entry.t) && lanes[entry.t] === "room" ? `room:${entry.d?.room ?? ""}` : null;
}

/** The lanes a server published as JSON text (the chat page's `data-lanes`), or `LANES` if `text` holds none. */
export function servedLanes(text) {
  try {
    const lanes = JSON.parse(text ?? "");
    if (lanes !== null && typeof lanes === "object" && !Array.isArray(lanes)) return lanes;
  } catch {
    // Not rendered (a host's own template): the built-in types' lanes.
  }
  return LANES;
}

function strip({ attempts, ...entry }) {
  return entry;
}

/**
 * One WebSocket, reopened after every loss with full-jitter backoff.
 *
 * `state` is `reconnecting` (with `nextTryAt`, or null while a try is in
 * flight), `open`, or `offline` (the browser says there is no network: no
 * tries until it says there is). A close with 4401 means the session is gone;
 * retrying cannot help, so `onUnauthorized` is called instead.
 */
export class Connection {
  constructor({
    url,
    createSocket = (u) => new WebSocket(u),
    timers = realTimers,
    random = Math.random,
    onOpen = () => {},
    onFrame = () => {},
    onClose = () => {},
    onState = () => {},
    onUnauthorized = () => {},
  }) {
    Object.assign(this, { url, createSocket, timers, random, onOpen, onFrame, onClose, onState, onUnauthorized });
    this.socket = null;
    this.attempt = 0;
    this.retry = null;
    this.state = "reconnecting";
    this.nextTryAt = null;
    this.online = true;
  }

  start() {
    this.connect();
  }

  setState(state, nextTryAt = null) {
    this.state = state;
    this.nextTryAt = nextTryAt;
    this.onState(state, nextTryAt);
  }

  connect() {
    this.retry = null;
    if (!this.online) return;
    this.setState("reconnecting");
    const socket = this.createSocket(this.url);
    this.socket = socket;
    socket.onopen = () => {
      if (this.socket !== socket) return;
      this.attempt = 0;
      this.setState("open");
      this.onOpen();
    };
    socket.onmessage = (event) => {
      if (this.socket !== socket) return;
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return;
      }
      this.onFrame(frame);
    };
    socket.onclose = (event) => {
      if (this.socket !== socket) return;
      this.lost(event.code);
    };
  }

  lost(code) {
    this.socket = null;
    this.onClose();
    if (code === 4401) {
      this.setState("offline");
      this.onUnauthorized();
      return;
    }
    if (!this.online) {
      this.setState("offline");
      return;
    }
    const delay = backoffDelay(this.attempt, { random: this.random });
    this.attempt += 1;
    this.retry = this.timers.setTimeout(() => this.connect(), delay);
    this.setState("reconnecting", this.timers.now() + delay);
  }

  send(frame) {
    if (!this.socket || this.state !== "open") return false;
    this.socket.send(JSON.stringify(frame));
    return true;
  }

  /** The browser lost the network: drop the socket now rather than wait for TCP to notice. */
  goOffline() {
    this.online = false;
    if (this.retry !== null) this.timers.clearTimeout(this.retry);
    this.retry = null;
    const socket = this.socket;
    if (socket) {
      this.socket = null;
      socket.close();
      this.onClose();
    }
    this.setState("offline");
  }

  /** The network is back: try at once, the backoff starts over. */
  goOnline() {
    if (this.online && this.state !== "offline") return;
    this.online = true;
    this.attempt = 0;
    this.connect();
  }
}
