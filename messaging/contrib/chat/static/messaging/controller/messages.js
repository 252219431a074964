// Messages: what frames and the outbox say of them goes into the model,
// then on screen; what the user does to one (post, "+1", edit, delete,
// retry, discard) goes into the outbox. Scroll-back's pages too.
//
// A thread's replies are drawn in its panel (controller/threads.js), emoji
// reactions have their controller (controller/emoji.js). A search result
// opens its room at its message (`reveal`).
import {
  changesOf,
  DELETE,
  EDIT,
  EMOJI,
  isChange,
  isReaction,
  POST,
  REACTION,
  reactionsWaiting,
  waiting,
} from "../model/commands.js";
import { filesOf } from "../model/files.js";
import { ACK_TIMEOUT_MS } from "../outbox.js";

// The most pages of scroll-back a search result's message is looked for in.
const REVEAL_PAGES = 20;

export class MessagesController {
  /** `page`: controller/page.js ChatPage. */
  constructor(page) {
    this.page = page;
  }

  get model() {
    return this.page.model;
  }

  get views() {
    return this.page.views;
  }

  // Drawing --------------------------------------------------------------------

  /** Draw `message` of `room` as the model and the outbox have it. */
  draw(room, message) {
    const entries = this.page.outbox.pending();
    const { slug } = room;
    const context = {
      changes: message.stored ? changesOf(entries, slug, message.seq) : [],
      reactions: { count: room.reactions.of(message.seq), waiting: reactionsWaiting(entries, slug, message.seq) },
      ...this.page.emoji.context(entries, room, message),
      files: filesOf(message, this.page.files.known),
      readers: () => room.readersOf(message),
    };
    if (message.replyTo !== null) this.page.threads.drawReply(room, message, context);
    else this.views.conversation.draw(slug, message, context);
  }

  redraw(room, messages) {
    for (const message of messages) this.draw(room, message);
  }

  /** The "Load older messages" button, for the room on screen. */
  drawHistory() {
    const room = this.model.current;
    this.views.history.draw({ mayHaveOlder: room?.mayHaveOlder() ?? false, loading: room?.paging.loading ?? false });
  }

  // Frames -----------------------------------------------------------------------

  /** A `msg`: shown once, in seq order; a gap makes the room rejoin. */
  msg(d) {
    const room = this.model.room(d.room);
    if (!room) return;
    room.cursor.take(d.rev);
    const { messages, repeat, gap } = room.receive(d);
    const rooms = this.page.rooms;
    if (gap && !room.joining) rooms.join(room);
    const onScreen = room === this.model.current;
    for (const message of messages) {
      const atEnd = this.views.conversation.nearEnd();
      this.draw(room, message);
      if (repeat) continue;
      this.page.people.posted(room.slug, message.senderId);
      if (onScreen && (atEnd || message.own)) this.views.conversation.scrollToEnd();
    }
    if (!repeat && messages.length > 0) {
      rooms.scheduleReceipts();
      // A message its ack placed may have been on screen before it counted as shown.
      if (onScreen) rooms.markRead();
    }
    rooms.showUnread(room);
    rooms.checkCursor(room);
    this.seekRevealed(room);
  }

  /** A `state` frame: one of this user's messages reached `delivered` or `read`. */
  state(d) {
    const room = this.model.room(d.room);
    const message = room?.state(d);
    if (message) this.draw(room, message);
  }

  /** A `reaction` frame: a message's count. */
  reaction(d) {
    const room = this.model.room(d.room);
    if (!room) return;
    room.cursor.take(d.rev);
    const message = room.timeline.at(d.seq);
    if (room.reacted(d.seq, d.count) && message) this.draw(room, message);
    this.page.rooms.checkCursor(room);
  }

  /** `msg.edit` or `msg.delete`: shown if newer than what the message shows; of one not held, scroll-back brings the current state. */
  changed(frame) {
    const d = frame.d;
    const room = this.model.room(d.room);
    if (!room) return;
    room.cursor.take(d.rev);
    const message = room.change(d.seq, d, { deleted: frame.t === "msg.delete" });
    if (message) this.draw(room, message);
    if (frame.t === "msg.delete") this.page.rooms.askUnread();
    this.page.rooms.showUnread(room);
    this.page.rooms.checkCursor(room);
  }

  // Scroll-back ---------------------------------------------------------------------

  /** The user asks for older messages of the room on screen. */
  wantOlder() {
    if (this.model.current) this.loadOlder(this.model.current);
  }

  loadOlder(room) {
    const d = room.nextPage();
    if (d === null) return;
    const sent = this.page.requests.ask("room.history", d, {
      answered: (ack) => this.olderAnswered(room, ack),
      lost: () => {
        room.paging.failed();
        this.drawHistory();
      },
    });
    if (sent) room.paging.sent();
    this.drawHistory();
  }

  /** A page of older messages: put in above what is shown, the user's place kept. */
  olderAnswered(room, ack) {
    if (!ack.ok) {
      room.paging.failed();
      this.drawHistory();
      return;
    }
    const oldest = room.timeline.oldestSeq();
    const insert = () => {
      for (const d of ack.d.messages) {
        const message = room.older(d);
        if (!message) continue;
        this.draw(room, message);
        this.page.people.posted(room.slug, message.senderId);
      }
    };
    const onScreen = room === this.model.current;
    if (onScreen) this.views.history.keepPlace(insert);
    else insert();
    room.paging.answered(ack.d.more);
    if (this.seekRevealed(room)) {
      this.drawHistory();
      return;
    }
    // A short page may leave the list at its top, where no scroll comes to ask
    // again; go on, as long as each page brings older messages.
    if (ack.d.more && onScreen && room.timeline.oldestSeq() < oldest && this.views.history.atTop()) {
      queueMicrotask(() => this.loadOlder(room));
    }
    this.drawHistory();
  }

  // A search result ----------------------------------------------------------------

  /** Show message `seq` of `room` (on screen), from older pages if it is not loaded yet. */
  reveal(room, seq) {
    room.revealing = { seq, pages: 0 };
    this.seekRevealed(room);
  }

  /**
   * Where `room` has a message to reveal: shown if it is in, else an older
   * page asked for once the room's messages are in and it is older than they
   * are. Whether the search goes on (a page was asked for).
   */
  seekRevealed(room) {
    const wanted = room.revealing;
    if (!wanted || room !== this.model.current) return false;
    const message = room.timeline.at(wanted.seq);
    if (message && this.views.conversation.reveal(room.slug, message)) {
      room.revealing = null;
      return false;
    }
    // Until the room's messages are in, and while a page is on its way, it waits.
    const oldest = room.timeline.oldestSeq();
    if (room.joining || room.paging.loading || oldest === null) return false;
    if (oldest < wanted.seq || !room.mayHaveOlder() || wanted.pages >= REVEAL_PAGES) {
      room.revealing = null; // gone (deleted since), or further back than it looks
      return false;
    }
    wanted.pages += 1;
    this.loadOlder(room);
    return true;
  }

  // The outbox -----------------------------------------------------------------------

  /** An own message from its outbox entry, made and drawn if new: `{room, message}`. */
  own(entry) {
    const room = this.model.room(entry.d.room) ?? this.page.rooms.add(entry.d.room);
    const { message, made } = room.own(entry);
    if (made) {
      this.draw(room, message);
      if (room === this.model.current) this.views.conversation.scrollToEnd();
    }
    return { room, message };
  }

  /** What the outbox says of an entry: "pending", "acked", "failed" or "timeout" (outbox.js `onChange`). */
  outboxChanged({ type, entry, ack }) {
    if (entry.t === REACTION) this.reactionChanged(type, entry, ack);
    else if (entry.t === EMOJI) this.page.emoji.changed(type, entry, ack);
    else if (isChange(entry)) this.changeChanged(type, entry, ack);
    else if (type === "pending") this.own(entry);
    else if (type === "acked") {
      // Stored: the ack's seq places it (it may be older than the backlog a
      // reload fetched). If the msg broadcast went missing, a rejoin fetches it.
      const { room, message } = this.own(entry);
      room.acked(message, ack);
      this.draw(room, message);
      if (message.stored) setTimeout(() => this.page.rooms.catchUp(room, message.seq), ACK_TIMEOUT_MS);
    } else if (type === "failed") {
      const { room, message } = this.own(entry);
      message.fail(entry.error);
      this.draw(room, message);
    }
    this.views.status.waiting(waiting(this.page.outbox.pending()));
  }

  /** An edit or delete: shown pending at once, then as the ack's version, or back with the reason. */
  changeChanged(type, entry, ack) {
    if (type === "failed") this.page.store.forget(entry.id);
    const room = this.model.room(entry.d.room);
    const message = room?.timeline.at(entry.d.seq);
    if (!message) return;
    if (type === "acked") {
      const d = entry.t === EDIT ? { body: entry.d.body, edited_at: ack.d?.edited_at } : {};
      room.change(entry.d.seq, { ...d, version: ack.d?.version }, { deleted: entry.t === DELETE });
      message.changeError = null;
    } else if (type === "failed") message.changeError = entry.error;
    this.draw(room, message);
    if (type === "acked" && entry.t === DELETE) this.page.rooms.showUnread(room);
  }

  /** A "+1": the count is the ack's; a refused click is not kept (the next click is a new one). */
  reactionChanged(type, entry, ack) {
    if (type === "failed") this.page.store.forget(entry.id);
    const room = this.model.room(entry.d.room);
    if (!room) return;
    if (type === "acked") room.reacted(entry.d.seq, ack.d?.count);
    const message = room.timeline.at(entry.d.seq);
    if (!message) return;
    if (type === "failed") message.reactionError = entry.error.message || entry.error.code;
    this.draw(room, message);
  }

  /** Refused commands kept from before a reload: a post shows failed, with Retry and Discard; the rest go. */
  restoreFailed(entries) {
    for (const entry of entries) {
      if (isReaction(entry) || isChange(entry)) this.page.store.forget(entry.id); // a page closed before it could
      else {
        const { room, message } = this.own(entry);
        message.fail(entry.error);
        this.draw(room, message);
      }
    }
  }

  // What the user does ------------------------------------------------------------------

  post(body) {
    const room = this.model.current;
    if (!room) return;
    this.page.people.stopped();
    this.page.outbox.submit(POST, { room: room.slug, body });
  }

  react(message) {
    message.reactionError = null;
    this.page.outbox.submit(REACTION, { room: message.room, seq: message.seq });
  }

  edit(message, body) {
    this.page.outbox.submit(EDIT, { room: message.room, seq: message.seq, body });
  }

  remove(message) {
    this.page.outbox.submit(DELETE, { room: message.room, seq: message.seq });
  }

  /** A retry is a new user action, so it gets a new id (the old one may be refused as id_reused). */
  retry(message) {
    this.forget(message);
    this.page.outbox.submit(message.command.t, message.command.d);
  }

  discard(message) {
    this.forget(message);
    this.views.composer.focus();
  }

  forget(message) {
    this.model.room(message.room)?.timeline.forget(message);
    this.views.conversation.remove(message.room, message);
    this.views.thread.remove(message);
    this.page.store.forget(message.id);
  }
}
