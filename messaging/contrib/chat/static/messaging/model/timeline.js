// A room's messages by (room, seq): each once, in seq order, and a gap
// noticed. No DOM.
//
// `shown` is the highest seq up to which every message is in; it is null
// until the first message after a join without `since` tells where the
// backlog starts. A `msg` at or below it is a repeat (it may still carry a
// newer version); one past `shown + 1` is held until the gap before it is
// filled, and the room should rejoin to fetch what is missing. Own messages
// are in from their optimistic copy on, keyed by command id, and take their
// seq from their ack or their `msg`, whichever comes first.
import { Message } from "./message.js";
import { isRanked, later } from "./states.js";

export class Timeline {
  constructor(slug) {
    this.slug = slug;
    this.shown = null;
    this.held = new Map(); // seq -> `d` of a msg that arrived past a gap
    this.bySeq = new Map(); // seq -> Message
    this.byKey = new Map(); // own: command id, others: "#seq" -> Message
    // seq -> the server's state of an own message the page does not have yet.
    this.early = new Map();
  }

  /**
   * A `msg`'s `d`. Returns what it means: `repeat` (seq already in or held),
   * `gap` (held: the room must rejoin), or `ready`, the `d`s now in order
   * (this one and those held behind it), for `put` to take in.
   */
  receive(d) {
    if (this.shown === null) this.shown = d.seq - 1;
    if (d.seq <= this.shown || this.held.has(d.seq)) return { repeat: true, gap: false, ready: [] };
    if (d.seq > this.shown + 1) {
      this.held.set(d.seq, d);
      return { repeat: false, gap: true, ready: [] };
    }
    const ready = [d];
    this.shown = d.seq;
    while (this.held.has(this.shown + 1)) {
      const next = this.held.get(this.shown + 1);
      this.held.delete(next.seq);
      ready.push(next);
      this.shown = next.seq;
    }
    return { repeat: false, gap: false, ready };
  }

  /** A join ack says the room has no message yet: nothing to wait for before the first. */
  empty() {
    if (this.shown === null) this.shown = 0;
  }

  /** A message known by its seq, or null. */
  at(seq) {
    return this.bySeq.get(seq) ?? null;
  }

  /**
   * The message of a stored `d` (a `msg`, a history page's entry): the one
   * already known by its key, or a new one; stored at its seq.
   * `me`: this user's id as frames carry it.
   */
  put(d, me) {
    const own = d.sender.id === me;
    const key = own ? d.id : `#${d.seq}`;
    let message = this.byKey.get(key);
    if (!message) {
      const sender = { senderId: d.sender.id, senderName: d.sender.name, senderNode: d.sender.node ?? null };
      message = new Message({ key, room: this.slug, id: d.id, own, ...sender, body: d.body });
      this.byKey.set(key, message);
    }
    this.store(message, d.seq, d.at);
    // A backlog `msg` of an own message carries its state (an extension of the server's).
    if (own && isRanked(d.state)) message.confirm(d.state);
    return message;
  }

  /** An own message from its outbox entry, made (state "sending") if new: `{message, made}`. */
  own(entry, me) {
    const known = this.byKey.get(entry.id);
    if (known) return { message: known, made: false };
    const command = { t: entry.t, d: entry.d };
    const { id, d } = entry;
    const message = new Message({ key: id, room: this.slug, id, own: true, senderId: me, body: d.body, command });
    message.setState("sending");
    this.byKey.set(entry.id, message);
    return { message, made: true };
  }

  /** `message` is stored at `seq`: findable by it, and any state told before it came applies. */
  store(message, seq, at) {
    message.store(seq, at);
    this.bySeq.set(seq, message);
    if (this.early.has(seq)) {
      if (message.own) message.confirm(this.early.get(seq));
      this.early.delete(seq);
    }
  }

  /**
   * A `state` frame's `d`: the message it changed, or null. For a message
   * still on its way (its ack or msg), the state waits for it; a seq below
   * what is shown with no message is older than the backlog, and dropped.
   */
  tell(seq, state) {
    if (!isRanked(state)) return null;
    const message = this.bySeq.get(seq);
    if (message) return message.own && message.confirm(state) ? message : null;
    if (this.shown === null || seq > this.shown) this.early.set(seq, later(this.early.get(seq), state));
    return null;
  }

  /** A failed own message retried (as a new one) or discarded: gone from the room. */
  forget(message) {
    this.byKey.delete(message.key);
    if (message.stored && this.bySeq.get(message.seq) === message) this.bySeq.delete(message.seq);
  }

  /** The lowest seq held, or null. */
  oldestSeq() {
    let oldest = null;
    for (const seq of this.bySeq.keys()) if (oldest === null || seq < oldest) oldest = seq;
    return oldest;
  }

  /** Every message, stored ones by seq. */
  messages() {
    return [...this.byKey.values()];
  }
}
