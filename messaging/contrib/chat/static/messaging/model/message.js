// One message of a room, as the page knows it. No DOM.
//
// Its identity: an own message is keyed by its command id from the
// optimistic copy on (the server's `msg` with that id is the same message,
// also across two tabs of the user); someone else's by its seq. Its state
// only moves up (states.js), and never below what the server itself told
// (`confirmed`). What the server stores of it (body, tombstone) changes only
// with a higher version (changes.js `newer`): an older edit or delete never
// overwrites a newer one.
//
// Beside `body` and `attachments` (its files: set from the stored `d` in
// `applyVersion`, drawn by views/message.js) it keeps its place in a thread:
// `replyTo` (a reply's root seq) or, for a root, `replies` and
// `lastReplyAt` (model/threads.js).
import { newer } from "./changes.js";
import { isRanked, later, rankOf } from "./states.js";

export class Message {
  /** `room`: its room's slug; `command`: an own message's outbox command (`t`, `d`), for a retry. */
  /** `senderNode`: the sender's deployment, where federation is on (null elsewhere). */
  constructor({ key, room, id, own, senderId, senderName = "", senderNode = null, body = "", command = null }) {
    Object.assign(this, { key, room, id, own, senderId, senderName, senderNode, command });
    this.seq = null; // null until the server stored it
    this.at = null; // when it was stored (ISO 8601), from the server
    this.state = null;
    this.confirmed = null; // the highest state the server itself told (`state` frames, a backlog `msg`)
    this.error = null; // why the server refused it (state "failed")
    // What the server stores: its version (0 until stored), body, tombstone.
    this.version = 0;
    this.body = body;
    this.attachments = []; // its files, as frames list them (model/files.js)
    this.deleted = false;
    this.edited = false;
    this.changeError = null; // why the last edit or delete of it was refused
    this.reactionError = null; // why this page's last "+1" (or emoji) was not counted
    this.replyTo = Number.isInteger(command?.d?.reply_to) ? command.d.reply_to : null;
    this.replies = 0; // a root's replies, as the server told them
    this.lastReplyAt = null;
  }

  get stored() {
    return this.seq !== null;
  }

  /** Unread to this user: someone else's message, not deleted. */
  get countsAsUnread() {
    return !this.own && !this.deleted;
  }

  /** Set the state as it is (a refusal, a correction); whether it changed. */
  setState(state) {
    if (this.state === state) return false;
    this.state = state;
    if (state !== "failed") this.error = null;
    return true;
  }

  /** Move up to `state` (a stored message is past failed, too); whether it moved. */
  advance(state) {
    if (!isRanked(state) || rankOf(state) <= rankOf(this.state)) return false;
    return this.setState(state);
  }

  /** A state the server told: never undone, even by a correction. */
  confirm(state) {
    if (!isRanked(state)) return false;
    this.confirmed = later(this.confirmed, state);
    return this.advance(state);
  }

  /**
   * `state` computed with members this page had missed (they joined after its
   * join): a state that ran ahead of the server's comes back, but never
   * below what the server told.
   */
  correct(state) {
    return this.setState(later(state, this.confirmed));
  }

  /** The server refused it for good (`retry: false`). */
  fail(error) {
    this.setState("failed");
    this.error = error;
  }

  /** The server stored it at `seq` (an ack's or a `msg`'s). */
  store(seq, at) {
    this.seq = seq;
    if (at) this.at = at;
  }

  /**
   * What a frame says the server stores (`msg`, `msg.edit`, `msg.delete`, an
   * ack of an edit or delete), taken only if its version is higher than the
   * one held. Returns whether it was.
   */
  applyVersion(d, { deleted = d.deleted === true } = {}) {
    if (!newer(d.version, this.version)) return false;
    this.version = d.version;
    // Deleted is final: the server never brings a message back.
    if (deleted || this.deleted) {
      Object.assign(this, { deleted: true, body: "", edited: false, attachments: [] });
      return true;
    }
    if (typeof d.body === "string") this.body = d.body;
    if (Array.isArray(d.attachments)) this.attachments = d.attachments;
    if (d.edited_at || d.version > 1) this.edited = true;
    return true;
  }
}
