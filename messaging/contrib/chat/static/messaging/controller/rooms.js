// Rooms on the page: joining (and rejoining after a reconnect, a gap or a
// cursor behind), which one is on screen, what the user has read of it and
// the receipts that report it, and its unread count. It holds only timers
// and the joins in flight; what it knows of a room is the model's.
import { GAP_WAIT_MS } from "../model/changes.js";
import { ACK_TIMEOUT_MS, backoffDelay } from "../outbox.js";

// Receipts and unread counts asked for are batched this long.
const BATCH_MS = 300;
// A room joined while online opens on its join's answer; with none in the
// time any command waits for its ack, it opens anyway.
const JOIN_OPEN_WAIT_MS = ACK_TIMEOUT_MS;

export class RoomsController {
  /** `page`: controller/page.js ChatPage (its model, views, connection, requests, outbox, store). */
  constructor(page) {
    this.page = page;
    this.gapTimers = new Map(); // Room -> timer of a rejoin for a skipped rev
    this.waiters = new Map(); // Room -> [resolve] of those waiting for its join's answer
    this.rejoins = new Set(); // ids of the joins of a reconnect, before the outbox resends
    this.resumeTimer = null;
    this.receiptTimer = null;
    this.unreadTimer = null;
  }

  get model() {
    return this.page.model;
  }

  get views() {
    return this.page.views;
  }

  /** A room on the page (made if new): in the model, the sidebar and the conversation. */
  add(slug) {
    const room = this.model.add(slug);
    this.views.sidebar.add(slug);
    this.views.conversation.add(slug);
    return room;
  }

  /**
   * Open room `slug`, joining it if new. A new room opens once the server
   * has its membership (the join's answer, within milliseconds), so a room
   * on screen is a room joined: a post anyone makes after that counts this
   * user among its recipients. Offline, the join waits for the connection
   * and the room opens at once; a join with no answer in JOIN_OPEN_WAIT_MS
   * opens it anyway.
   */
  async open(slug, { select = true } = {}) {
    if (!this.model.room(slug)) {
      await this.page.store.addRoom(slug);
      const fresh = !this.model.room(slug); // not added by another open meanwhile
      const room = this.add(slug);
      if (fresh) this.join(room);
      if (select && room.joining) {
        const before = this.model.selections;
        await this.answerOf(room);
        // The user opened another room meanwhile, or this one is gone.
        if (this.model.selections !== before || this.model.room(slug) !== room) return;
      }
    }
    const room = this.model.room(slug);
    if (!select || !room) return;
    this.select(room);
    this.views.composer.focus();
  }

  answerOf(room) {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, JOIN_OPEN_WAIT_MS);
      const waiting = this.waiters.get(room) ?? [];
      waiting.push(() => {
        clearTimeout(timer);
        resolve();
      });
      this.waiters.set(room, waiting);
    });
  }

  /** The join of `room` is answered (or lost): whoever waits for it goes on. */
  wake(room) {
    const waiting = this.waiters.get(room) ?? [];
    this.waiters.delete(room);
    for (const resolve of waiting) resolve();
  }

  /**
   * (Re)join with `since_rev` once the room's cursor has started, so the
   * backlog is exactly what changed since: posts, edits, deletes and counts.
   * Returns the join's id, or null if it could not be sent.
   */
  join(room) {
    clearTimeout(this.gapTimers.get(room));
    this.gapTimers.delete(room);
    const d = { room: room.slug, ...room.cursor.joinData() };
    const id = this.page.requests.ask("room.join", d, {
      answered: (ack) => this.joinAnswered(room, id, ack),
      lost: () => this.joinLost(room, id),
    });
    if (id) room.joining = id;
    return id;
  }

  joinAnswered(room, id, ack) {
    if (room.joining === id) {
      room.joining = null;
      if (ack.ok && this.model.room(room.slug) === room) this.joined(room, ack.d);
      else if (!ack.ok && ack.error.retry) {
        setTimeout(() => this.live(room) && !room.joining && this.join(room), backoffDelay(2));
      }
      this.wake(room);
    }
    this.rejoined(id);
  }

  joinLost(room, id) {
    if (room.joining === id) room.joining = null;
    this.wake(room);
    this.rejoined(id);
  }

  /** A join's ack: the model takes it in; states, badge, receipts and the cursor follow. */
  joined(room, d) {
    this.page.messages.redraw(room, room.joined(d));
    this.views.conversation.drawReaders(room.slug);
    this.showUnread(room);
    this.scheduleReceipts();
    this.checkCursor(room);
    this.page.people.joined(room.slug, d);
  }

  /** Whether `room` is still on the page and the connection open. */
  live(room) {
    return this.model.room(room.slug) === room && this.page.connection.state === "open";
  }

  /** After a frame with a rev: rejoin if the room is behind, or if a skipped rev stays missing. */
  checkCursor(room) {
    this.placeDivider(room);
    if (room === this.model.current) this.page.messages.drawHistory();
    const missing = room.cursor.missing();
    if (missing === null || room.joining || !this.live(room)) return;
    if (missing === "behind") this.join(room);
    else if (!this.gapTimers.has(room)) {
      const timer = setTimeout(() => {
        this.gapTimers.delete(room);
        if (room.cursor.missing() !== null && !room.joining && this.live(room)) this.join(room);
      }, GAP_WAIT_MS);
      this.gapTimers.set(room, timer);
    }
  }

  /** An own post's ack said `seq`: if its `msg` never came, a rejoin fetches it, with anything posted meanwhile. */
  catchUp(room, seq) {
    const { shown } = room.timeline;
    if (shown !== null && shown < seq && !room.joining && this.live(room)) this.join(room);
  }

  /** A `status` frame: a member's watermarks moved. */
  status(d) {
    const room = this.model.room(d.room);
    if (!room) return;
    const { known, changed } = room.status(d);
    if (!known) {
      // Someone who joined after us: the join ack tells when, which the
      // recipients rule needs (unless the ack lists only some members anyway).
      if (!room.joining && !room.members.partial) this.join(room);
      return;
    }
    // This user read on another tab or device: the badges follow.
    if (d.user === this.model.me && d.read > room.unread.read) this.askUnread();
    this.page.messages.redraw(room, changed);
    // Who has read a message may change with no change of its state.
    this.views.conversation.drawReaders(room.slug);
  }

  // On screen ---------------------------------------------------------------

  select(room) {
    const previous = this.model.current;
    // What the read tracking has not reported yet counts too: the user saw it before leaving.
    if (previous && previous !== room) {
      this.markRead(this.views.reading.onScreenNow(this.views.conversation.list(previous.slug)));
    }
    this.model.select(room);
    if (previous !== room) this.page.threads.close(); // a thread panel belongs to the room it was opened in
    this.views.conversation.show(room.slug);
    this.views.sidebar.select(room.slug);
    this.views.conversation.heading(room.direct ?? `# ${room.slug}`);
    this.views.composer.enable(true);
    this.views.uploads.enable(true);
    localStorage.setItem(`messaging:${this.model.me}:room`, room.slug);
    this.placeDivider(room);
    this.page.messages.drawHistory();
    this.page.people.show(room.slug);
    this.views.conversation.scrollToEnd();
    this.markRead();
  }

  /** The divider, drawn once as the room opens, when the model can tell where. */
  placeDivider(room) {
    if (room !== this.model.current) return;
    const divider = room.divider();
    if (divider) this.views.conversation.divider(room.slug, divider.seq);
  }

  /** A direct room, listed apart under the other person's name. */
  direct(slug, name) {
    const room = this.model.room(slug);
    if (!room || room.direct === name) return;
    room.direct = name;
    this.views.sidebar.direct(slug, name);
    if (room === this.model.current) this.views.conversation.heading(name);
  }

  /** A room the user left or was removed from: off the page, not rejoined. */
  drop(slug) {
    const room = this.model.room(slug);
    const wasCurrent = this.model.drop(slug);
    if (!room) return;
    clearTimeout(this.gapTimers.get(room));
    this.gapTimers.delete(room);
    this.views.conversation.drop(slug);
    this.views.sidebar.drop(slug);
    this.page.store.dropRoom(slug);
    if (!wasCurrent) return;
    this.views.conversation.heading(null);
    this.views.composer.enable(false);
    this.views.uploads.enable(false);
    this.page.people.show(null);
    this.page.messages.drawHistory();
  }

  // Read marks, receipts and unread counts --------------------------------------------

  /** Move the read mark of the room on screen to what is on screen (and `alsoSeen`), in a focused, visible tab. */
  markRead(alsoSeen = []) {
    const room = this.model.current;
    if (!room || !this.views.reading.attending()) return;
    const list = this.views.conversation.list(room.slug);
    if (!room.read([...this.views.reading.seen(list), ...alsoSeen])) return;
    this.showUnread(room);
    this.scheduleReceipts();
  }

  showUnread(room) {
    this.views.sidebar.unread(room.slug, room.unreadCount());
  }

  /** Cumulative watermarks, at most one receipt per room every BATCH_MS. */
  scheduleReceipts() {
    if (this.receiptTimer === null) this.receiptTimer = setTimeout(() => this.flushReceipts(), BATCH_MS);
  }

  flushReceipts() {
    this.receiptTimer = null;
    for (const room of this.model.rooms.values()) {
      const d = room.receiptDue();
      if (d === null) continue;
      const sent = this.page.requests.ask("receipt", d, { answered: (ack) => this.receiptAnswered(room, ack) });
      if (sent) room.receiptSent(d);
    }
  }

  receiptAnswered(room, ack) {
    if (ack.ok) {
      if (ack.d.read > room.unread.read) this.askUnread();
      return;
    }
    // Not moved: say it again later (watermarks are cumulative, so repeating is harmless).
    room.receipts.refused();
    if (ack.error.retry) setTimeout(() => this.scheduleReceipts(), backoffDelay(2));
  }

  /** The server's unread counts again (`rooms.list`): after receipts moved the watermark, or a delete. */
  askUnread() {
    if (this.unreadTimer !== null) return;
    this.unreadTimer = setTimeout(() => {
      this.unreadTimer = null;
      this.page.requests.ask("rooms.list", {}, { answered: (ack) => this.unreadAnswered(ack) });
    }, BATCH_MS);
  }

  unreadAnswered(ack) {
    if (!ack.ok) return;
    for (const entry of ack.d.rooms) {
      const room = this.model.room(entry.room);
      // An invitation's entry tells nothing of the room's messages.
      if (!room || entry.invited) continue;
      room.unread.baseline(entry);
      this.showUnread(room);
    }
  }

  // The connection ---------------------------------------------------------------

  /** (Re)connected: rejoin every room first, then resend the outbox (a post needs the membership its join makes). */
  opened() {
    this.rejoins = new Set();
    for (const room of this.model.rooms.values()) {
      const id = this.join(room);
      if (id) this.rejoins.add(id);
    }
    this.resumeTimer = setTimeout(() => this.resume(), ACK_TIMEOUT_MS);
    if (this.rejoins.size === 0) this.resume();
  }

  rejoined(id) {
    if (this.rejoins.delete(id) && this.rejoins.size === 0) this.resume();
  }

  resume() {
    clearTimeout(this.resumeTimer);
    this.rejoins.clear();
    this.page.outbox.resume();
  }

  /** The connection is gone: joins, pages and replays in flight will not be answered. */
  lost() {
    clearTimeout(this.resumeTimer);
    this.rejoins.clear();
    for (const room of this.model.rooms.values()) {
      room.lost();
      this.wake(room);
    }
  }
}
