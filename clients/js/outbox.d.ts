// Types of outbox.js (the module itself is plain JavaScript, no build step).
// tests/js/package.test.mjs checks that every export is declared here.

/** Milliseconds an entry waits for its ack before it is sent again. */
export declare const ACK_TIMEOUT_MS: number;
/** The first backoff's ceiling, in milliseconds. */
export declare const BACKOFF_BASE_MS: number;
/** No backoff is longer, in milliseconds. */
export declare const BACKOFF_CAP_MS: number;

/** A refusal's error, as an ack carries it (PROTOCOL.md). */
export interface AckError {
  code: string;
  message: string;
  retry: boolean;
  retry_after?: number;
  [extra: string]: unknown;
}

/** The server's ack of one command. */
export interface Ack {
  t: "ack";
  id: string;
  ok: boolean;
  dup?: boolean;
  d?: Record<string, unknown>;
  error?: AckError;
}

/** A command as it is sent: its id, minted once per user action, its type and data. */
export interface CommandFrame {
  id: string;
  t: string;
  d: Record<string, unknown>;
}

/** One pending (or failed) command, as the store keeps it. */
export interface OutboxEntry extends CommandFrame {
  state: "sending" | "failed";
  /** When it was made (ms), so that entries of several tabs keep their order. */
  order: number;
  error?: AckError;
}

/** Where entries persist (the page's is IndexedDB: store.js); every method may be async. */
export interface OutboxStore {
  all(): Promise<OutboxEntry[]> | OutboxEntry[];
  put(entry: OutboxEntry): Promise<void> | void;
  delete(id: string): Promise<void> | void;
  /** Keep a refused entry as failed (the page shows it), out of the pending ones. */
  fail(entry: OutboxEntry): Promise<void> | void;
}

/** Time and timers, given in so tests can step through them. */
export interface Timers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export type OutboxChange =
  | { type: "pending"; entry: OutboxEntry }
  | { type: "timeout"; entry: OutboxEntry }
  | { type: "acked"; entry: OutboxEntry; ack: Ack }
  | { type: "failed"; entry: OutboxEntry };

export interface OutboxOptions {
  store: OutboxStore;
  /** Send one frame; false when there is no open socket (the entry waits for `resume`). */
  transmit(frame: CommandFrame): boolean;
  ackTimeout?: number;
  timers?: Timers;
  random?: () => number;
  mintId?: () => string;
  onChange?: (change: OutboxChange) => void;
  /** Per command type, its lane ("room": one per `d.room`); the server publishes them as `x-messaging-lanes`. */
  lanes?: Lanes;
}

export type Lanes = Readonly<Record<string, "room">>;

/** The built-in types' lanes, for a client that has not read the server's. */
export declare const LANES: Lanes;

/** The lanes a server published as JSON text (the chat page's `data-lanes`), or `LANES` if it holds none. */
export declare function servedLanes(text: string | null | undefined): Lanes;

/**
 * A time-ordered command id (UUID version 7): the time in milliseconds, then
 * random bits. What an `Outbox` mints unless given `mintId`.
 */
export declare function timeOrderedId(now?: number, random?: Uint8Array): string;

/** Full jitter: uniform in [0, min(cap, base * 2^attempt)). */
export declare function backoffDelay(
  attempt: number,
  options?: { base?: number; cap?: number; random?: () => number },
): number;

/**
 * The lane of an entry: a room's posts, edits and deletes (`room:<slug>`) go
 * one at a time, in order; any other type has none (null) and is not held.
 */
export declare function laneOf(entry: CommandFrame, lanes?: Lanes): string | null;

/** Pending commands, each sent with the id minted once for its user action until an ok or a final refusal. */
export declare class Outbox {
  constructor(options: OutboxOptions);
  readonly size: number;
  ready: boolean;
  pending(): OutboxEntry[];
  /** Take in what the store holds (an earlier life of this page, another tab). */
  load(): Promise<void>;
  /**
   * One user action: mint its id, persist it, send it when its turn comes.
   * `options.id` is an id minted before (an action begun
   * earlier, such as a file's upload), else one is minted now; an entry the
   * id already names is returned as it is.
   */
  submit(t: string, d: Record<string, unknown>, options?: { id?: string | null }): Promise<OutboxEntry>;
  /** The socket is (re)joined: resend everything, in order, with the original ids. */
  resume(): Promise<void>;
  pump(): void;
  /** The socket is gone: nothing can be acked until the next `resume()`. */
  pause(): void;
  send(id: string): void;
  expire(id: string): void;
  clearTimer(id: string): void;
  /** True when the ack was for an entry of this outbox. */
  handleAck(frame: Ack): Promise<boolean>;
}

export type ConnectionState = "reconnecting" | "open" | "offline";

/** The part of a WebSocket a `Connection` uses. */
export interface SocketLike {
  onopen: ((event?: unknown) => void) | null;
  onmessage: ((event: { data: string }) => void) | null;
  onclose: ((event: { code: number }) => void) | null;
  send(data: string): void;
  close(): void;
}

export interface ConnectionOptions {
  url: string;
  createSocket?: (url: string) => SocketLike;
  timers?: Timers;
  random?: () => number;
  onOpen?: () => void;
  onFrame?: (frame: Record<string, unknown>) => void;
  onClose?: () => void;
  onState?: (state: ConnectionState, nextTryAt: number | null) => void;
  /** A close with 4401: the session signs nobody in; retrying cannot help. */
  onUnauthorized?: () => void;
}

/** One WebSocket, reopened after every loss with full-jitter backoff. */
export declare class Connection {
  constructor(options: ConnectionOptions);
  socket: SocketLike | null;
  attempt: number;
  state: ConnectionState;
  nextTryAt: number | null;
  online: boolean;
  start(): void;
  connect(): void;
  lost(code: number): void;
  /** False when there is no open socket. */
  send(frame: CommandFrame): boolean;
  /** The browser lost the network: drop the socket now. */
  goOffline(): void;
  /** The network is back: try at once, the backoff starts over. */
  goOnline(): void;
}
