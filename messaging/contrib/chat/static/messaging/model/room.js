// One room as the page knows it: its messages, its members' watermarks,
// what this user has read and reported, its unread count, its change cursor
// and its scroll-back. No DOM, no connection: the controller hands it what
// frames say and does what it answers (rejoin, draw, report).
//
// A thread's replies are messages of `timeline` with `replyTo`
// (model/threads.js); emoji reactions are `emoji` (model/emoji.js).
import { RevCursor } from "./changes.js";
import { Members } from "./members.js";
import { Paging } from "./paging.js";
import { EmojiReactions } from "./emoji.js";
import { ReactionCounts } from "./reactions.js";
import { Receipts } from "./receipts.js";
import { takeThread } from "./threads.js";
import { Timeline } from "./timeline.js";
import { Unread } from "./unread.js";

const countsAsUnread = (message) => message.countsAsUnread;

export class Room {
  /** `me`: this user's id as frames carry it (a number, or a string for a UUID key). */
  constructor(slug, me) {
    this.slug = slug;
    this.me = me;
    this.direct = null; // a direct room: the other person's name
    this.joining = null; // id of the join in flight
    this.timeline = new Timeline(slug);
    this.members = new Members();
    this.receipts = new Receipts();
    this.reactions = new ReactionCounts();
    this.emoji = new EmojiReactions();
    this.unread = new Unread();
    this.cursor = new RevCursor();
    this.paging = new Paging();
  }

  // Messages -----------------------------------------------------------------

  /**
   * A `msg` frame's `d`. Returns `{messages, repeat, gap}`: the messages now
   * in, in seq order (for a repeat, the one it brought a newer version of,
   * if any), and whether a gap before it asks for a rejoin.
   */
  receive(d) {
    const { repeat, gap, ready } = this.timeline.receive(d);
    if (repeat) {
      const message = this.timeline.at(d.seq);
      const changed = message && [message.applyVersion(d), this.extras(message, d)].some(Boolean);
      return { messages: changed ? [message] : [], repeat, gap };
    }
    return { messages: ready.map((each) => this.put(each)), repeat, gap };
  }

  /** A stored message's `d` (a `msg`'s, a history page's): in its place, state and version. */
  put(d) {
    const message = this.timeline.put(d, this.me);
    message.advance(this.stateOf(message));
    message.applyVersion(d);
    this.extras(message, d);
    return message;
  }

  /** What a stored `d` says beyond the message's own version: its thread, its emoji; whether it moved. */
  extras(message, d) {
    if (Number.isInteger(d.reply_to)) message.replyTo = d.reply_to;
    const thread = takeThread(message, d);
    return [thread, this.emoji.fromMessage(d)].some(Boolean);
  }

  /** A message of a `room.history` page; null if the room has it already. */
  older(d) {
    return this.timeline.at(d.seq) ? null : this.put(d);
  }

  /** An own message from its outbox entry: `{message, made}`. */
  own(entry) {
    return this.timeline.own(entry, this.me);
  }

  /** The ack of an own post: stored at its seq, or (a server that says none) "sent". */
  acked(message, ack) {
    if (Number.isInteger(ack.d?.seq)) {
      this.timeline.store(message, ack.d.seq, ack.d.at);
      message.advance(this.stateOf(message));
    } else message.advance("sent");
  }

  /** A `state` frame's `d`: the own message it moved, or null. */
  state(d) {
    return this.timeline.tell(d.seq, d.state);
  }

  /** A `msg.edit` or `msg.delete` frame's `d`, or an own change's ack: the message it changed, or null. */
  change(seq, d, { deleted }) {
    const message = this.timeline.at(seq);
    if (deleted) this.emoji.forget(seq);
    return message?.applyVersion(d, { deleted }) ? message : null;
  }

  /** A reaction count told for `seq` (a frame's, an ack's): whether it is news. */
  reacted(seq, count) {
    return this.reactions.take(seq, count);
  }

  /** The state the server records for `message`, by the recipients rule. */
  stateOf(message) {
    return message.stored ? this.members.stateOf(message.seq, message.senderId) : null;
  }

  /** Who has read `message`: `{partial, total, names}` (this user is "you"). */
  readersOf(message) {
    const { partial, total } = this.members;
    const names = this.members.readers(message.seq, message.senderId);
    return { partial, total, names: names.map((id) => (id === this.me ? "you" : this.members.nameOf(id))) };
  }

  // Members ------------------------------------------------------------------

  /**
   * A join ack's `d`: members and their watermarks, this user's reported
   * ones, the unread count, the cursor's start. Returns the messages whose
   * state changed.
   */
  joined(d) {
    this.joining = null;
    const newcomers = this.members.joined(d);
    const mine = this.members.watermarks(this.me);
    this.receipts.joined(mine);
    // An empty room has no backlog to say where it starts.
    if (d.last_seq === 0) this.timeline.empty();
    this.unread.baseline({ ...d, read: mine.read });
    this.cursor.joined(d);
    return this.refreshStates(newcomers);
  }

  /**
   * A `status` frame's `d`. Returns `{known, changed}`: false for a member
   * who joined after this page's join (a rejoin tells when), and the
   * messages whose state moved.
   */
  status(d) {
    if (!this.members.status(d)) return { known: false, changed: [] };
    return { known: true, changed: this.refreshStates() };
  }

  /**
   * Bring states up to the members' watermarks. `correct`: members were
   * missing from what the states were computed with, so a state may have
   * run ahead of the server's: set it exactly (never below what it told).
   */
  refreshStates(correct = false) {
    const changed = [];
    for (const message of this.timeline.messages()) {
      if (!message.stored || message.state === "failed") continue;
      const state = this.stateOf(message);
      if (correct ? message.correct(state) : message.advance(state)) changed.push(message);
    }
    return changed;
  }

  // Reading ------------------------------------------------------------------

  /**
   * Messages `seqs` were seen on screen: whether the read mark moved. The
   * replies right after the newest of them go with it: the room's list does
   * not show replies (their thread panel does), so nothing else would pass them.
   */
  read(seqs) {
    if (seqs.length === 0) return this.receipts.read(seqs, this.timeline.shown);
    let top = Math.max(...seqs);
    while (Number.isInteger(this.timeline.at(top + 1)?.replyTo)) top += 1;
    return this.receipts.read([...seqs, top], this.timeline.shown);
  }

  /** The receipt's `d` due now, or null (none while a join is in flight: its ack resets what was told). */
  receiptDue() {
    return this.joining ? null : this.receipts.due(this.slug, this.timeline.shown);
  }

  /** A receipt went out: what it said counts as told. */
  receiptSent(d) {
    this.receipts.sent(d);
  }

  unreadCount() {
    return this.unread.count(this.timeline.bySeq, this.receipts.readMark, countsAsUnread);
  }

  /** Where the divider goes, the one time it is due and known: `{seq}`, else undefined. */
  divider() {
    const replaying = this.cursor.replayLeft > 0;
    return this.unread.divider(this.timeline.bySeq, this.receipts.readMark, countsAsUnread, replaying);
  }

  // Scroll-back --------------------------------------------------------------

  mayHaveOlder() {
    return this.paging.mayHaveOlder(this.timeline.oldestSeq());
  }

  /** The `room.history` `d` of the next page, or null. */
  nextPage() {
    return this.paging.next(this.slug, this.timeline.oldestSeq());
  }

  /** The socket is gone: a join, a page or a replay in flight will not be answered. */
  lost() {
    this.joining = null;
    this.paging.failed();
    this.cursor.lost();
  }
}
