// The page's connection to the server, as the controller sees it.
//
// A connection is an object with
//   - `transport`: its kind, shown as `[data-testid=conn]`'s `data-transport`
//     ("ws"; "sse" for server-sent events);
//   - `state` ("reconnecting", "open", "offline") and `nextTryAt` (when the
//     next try is due, in ms since the epoch, or null);
//   - `start()`, `goOffline()`, `goOnline()` (the browser's network events);
//   - `send(frame)`: the frame goes out now, or false if it cannot (not open);
// and it calls back the handlers it was made with: `onOpen()` (then the
// page rejoins its rooms and resends its outbox), `onFrame(frame)` for each
// frame in arrival order, `onClose()` when frames and acks in flight are
// lost, `onState()` on every change of `state`, and `onUnauthorized()` when
// the session is gone (4401). The WebSocket one is outbox.js's `Connection`;
// stream.js's `StreamConnection` is the one over plain HTTP.
//
// "auto" (the page's): a WebSocket; when two in a row close without a frame
// (refused, or cut by a proxy) while HTTP answers, the stream and POST
// /api/commands instead, and a WebSocket is tried again every minute.
import { Connection } from "./outbox.js";
import { StreamConnection } from "./stream.js";

const RETRY_WS_MS = 60_000;
// A tried WebSocket that stays open this long is taken to work.
const WS_WORKS_AFTER_MS = 2_000;

function socketUrl() {
  return `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/`;
}

/** When to leave the WebSocket: after `limit` sockets in a row closed without a frame. */
export class TransportChoice {
  constructor(limit = 2) {
    this.limit = limit;
    this.failures = 0;
  }

  /** A socket closed; `delivered`: whether any frame came over it. Whether to use the stream now. */
  closed(delivered) {
    this.failures = delivered ? 0 : this.failures + 1;
    return this.failures >= this.limit;
  }

  reset() {
    this.failures = 0;
  }
}

/** The connection of `transport` ("ws", "sse" or "auto") to this page's server, calling `handlers` back. */
export function openConnection(transport, handlers, options = {}) {
  if (transport === "ws") return Object.assign(new Connection({ url: socketUrl(), ...handlers }), { transport });
  if (transport === "sse") return new StreamConnection({ ...handlers, ...options });
  if (transport === "auto") return new SwitchingConnection(handlers, options);
  throw new Error(`no connection of transport ${transport}`);
}

/** A WebSocket while it works, else the stream; the same handlers for both. */
export class SwitchingConnection {
  constructor(
    handlers,
    {
      createSocket = (url) => new WebSocket(url),
      httpWorks = () => fetch(location.pathname, { method: "HEAD", credentials: "same-origin" }).then(() => true, () => false),
      timers = { setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (h) => clearTimeout(h) },
      createSource,
      post,
    } = {},
  ) {
    Object.assign(this, { handlers, createSocket, httpWorks, timers });
    this.choice = new TransportChoice();
    this.delivered = false;
    this.ws = new Connection({
      url: socketUrl(),
      createSocket,
      ...handlers,
      onOpen: () => {
        this.delivered = false;
        handlers.onOpen();
      },
      onFrame: (frame) => {
        this.delivered = true;
        handlers.onFrame(frame);
      },
      onClose: () => {
        handlers.onClose();
        if (this.choice.closed(this.delivered)) this.leaveSocket();
      },
    });
    const streamOptions = { ...handlers, ...(createSource ? { createSource } : {}), ...(post ? { post } : {}) };
    this.sse = new StreamConnection(streamOptions);
    this.active = this.ws;
  }

  get transport() {
    return this.active.transport ?? "ws";
  }

  get state() {
    return this.active.state;
  }

  get nextTryAt() {
    return this.active.nextTryAt;
  }

  start() {
    this.ws.start();
  }

  send(frame) {
    return this.active.send(frame);
  }

  goOffline() {
    this.active.goOffline();
  }

  goOnline() {
    this.active.goOnline();
  }

  async leaveSocket() {
    if (this.active !== this.ws || !(await this.httpWorks())) return;
    // The socket stops trying; the stream takes over with the same handlers.
    this.ws.online = false;
    if (this.ws.retry !== null) this.timers.clearTimeout(this.ws.retry);
    this.ws.retry = null;
    this.active = this.sse;
    this.sse.start();
    this.later = this.timers.setTimeout(() => this.trySocket(), RETRY_WS_MS);
  }

  /** A WebSocket of its own: if it stays open, the page goes back to WebSockets. */
  trySocket() {
    let socket;
    try {
      socket = this.createSocket(socketUrl());
    } catch {
      socket = null;
    }
    const again = () => (this.later = this.timers.setTimeout(() => this.trySocket(), RETRY_WS_MS));
    if (!socket) return again();
    let timer = null;
    socket.onopen = () => {
      timer = this.timers.setTimeout(() => {
        socket.onclose = null;
        socket.close();
        this.backToSocket();
      }, WS_WORKS_AFTER_MS);
    };
    socket.onclose = () => {
      if (timer !== null) this.timers.clearTimeout(timer);
      again();
    };
  }

  backToSocket() {
    if (this.active !== this.sse) return;
    this.sse.stop();
    this.sse.setState("reconnecting");
    this.handlers.onClose();
    this.choice.reset();
    this.active = this.ws;
    this.ws.online = true;
    this.ws.attempt = 0;
    this.ws.connect();
  }
}
