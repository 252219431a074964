// The page's connection over plain HTTP, for networks that refuse WebSockets
// (docs/PROTOCOL.md, "Server-sent events"): what a socket would receive comes
// from `GET /api/stream?rooms=...` (an EventSource), and each frame the page
// sends goes to `POST /api/commands`, whose answer is its ack. The interface is
// connection.js's, so the outbox, its ids and its states are the same.
//
// A stream serves a fixed list of rooms: a `room.join` of another adds it to
// the list and opens a stream of them all, which replaces the old one once
// it is ready; a join is acked from the `ready` event's entry for its room.
// The browser's EventSource reconnects by itself, sending the last event's
// id (`Last-Event-ID`), and the server resumes from it.

const MAX_ROOMS = 200;
// EventSource hands an event to the listeners of its `event:` name only: every frame type a socket gets.
export const FRAME_TYPES = [
  "msg",
  "msg.edit",
  "msg.delete",
  "state",
  "reaction",
  "reactions",
  "thread",
  "status",
  "presence",
  "typing",
  "invited",
  "room.left",
  "error",
  "message",
];

/** The stream's URL for `rooms`. */
export function streamUrl(rooms) {
  return `/api/stream?rooms=${rooms.map(encodeURIComponent).join(",")}`;
}

/** A failed command's ack, as the socket would have answered it (the outbox resends on `retry`). */
export function failedAck(id, status) {
  const retry = status === 0 || status === 429 || status >= 500;
  return { t: "ack", id, ok: false, error: { code: retry ? "unavailable" : "bad_frame", message: `HTTP ${status}`, retry } };
}

export class StreamConnection {
  constructor({
    createSource = (url) => new EventSource(url),
    post = postCommand,
    onOpen = () => {},
    onFrame = () => {},
    onClose = () => {},
    onState = () => {},
    onUnauthorized = () => {},
  }) {
    Object.assign(this, { createSource, post, onOpen, onFrame, onClose, onState, onUnauthorized });
    this.transport = "sse";
    this.state = "reconnecting";
    this.nextTryAt = null;
    this.rooms = [];
    // Joins waiting for a stream that has their room: room -> ids.
    this.waiting = new Map();
    this.source = null;
    this.opening = null;
    this.online = true;
  }

  setState(state) {
    this.state = state;
    this.onState(state, null);
  }

  start() {
    if (!this.online) return;
    this.setState("open");
    this.onOpen();
  }

  stop() {
    for (const source of [this.source, this.opening]) source?.close();
    this.source = this.opening = null;
  }

  goOffline() {
    this.online = false;
    this.stop();
    this.onClose();
    this.setState("offline");
  }

  goOnline() {
    if (this.online) return;
    this.online = true;
    if (this.rooms.length) this.open();
    this.start();
  }

  /** The stream of `this.rooms`; it replaces the one before once it is ready. */
  open() {
    this.opening?.close();
    const source = this.createSource(streamUrl(this.rooms));
    this.opening = source;
    source.addEventListener("ready", (event) => this.ready(source, event));
    for (const type of FRAME_TYPES) source.addEventListener(type, (event) => this.event(source, event));
    source.onerror = () => {
      // CLOSED: the server refused it (401, 403); otherwise the browser reconnects it.
      if (source.readyState === 2 && (source === this.source || source === this.opening)) this.failed(source);
    };
  }

  ready(source, event) {
    if (source === this.opening) {
      this.source?.close();
      this.source = source;
      this.opening = null;
    }
    let rooms = [];
    try {
      rooms = JSON.parse(event.data).rooms ?? [];
    } catch {
      return;
    }
    for (const d of rooms) {
      for (const id of this.waiting.get(d.room) ?? []) this.onFrame({ t: "ack", id, ok: true, d });
      this.waiting.delete(d.room);
    }
  }

  event(source, event) {
    if (source !== this.source) return;
    let frame;
    try {
      frame = JSON.parse(event.data);
    } catch {
      return;
    }
    this.onFrame(frame);
  }

  failed(source) {
    source.close();
    if (source === this.opening) this.opening = null;
    if (source === this.source) this.source = null;
    for (const [room, ids] of this.waiting) {
      for (const id of ids) this.onFrame(failedAck(id, 503));
      this.waiting.delete(room);
    }
  }

  /** A frame out: a join (re)opens the stream; anything else is POSTed, and its answer is its ack. */
  send(frame) {
    if (this.state !== "open") return false;
    if (frame.t === "room.join" && typeof frame.d?.room === "string") {
      const room = frame.d.room;
      this.waiting.set(room, [...(this.waiting.get(room) ?? []), frame.id]);
      if (!this.rooms.includes(room) && this.rooms.length < MAX_ROOMS) this.rooms.push(room);
      // Joins sent together open one stream.
      if (!this.scheduled) {
        this.scheduled = true;
        queueMicrotask(() => {
          this.scheduled = false;
          this.open();
        });
      }
      return true;
    }
    this.post(frame).then(
      ({ status, ack }) => {
        if (status === 401) {
          this.setState("offline");
          this.onUnauthorized();
          return;
        }
        this.onFrame(ack ?? failedAck(frame.id, status));
      },
      () => this.onFrame(failedAck(frame.id, 0)),
    );
    return true;
  }
}

function csrfToken() {
  return document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/)?.[1] ?? "";
}

/** `POST /api/commands` with the frame's id as its Idempotency-Key: `{status, ack}`. */
export async function postCommand(frame) {
  const response = await fetch("/api/commands", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "Idempotency-Key": frame.id, "X-CSRFToken": csrfToken() },
    body: JSON.stringify({ t: frame.t, d: frame.d }),
  });
  let ack = null;
  try {
    const body = await response.json();
    if (body && body.t === "ack") ack = body;
  } catch {
    ack = null;
  }
  return { status: response.status, ack };
}
