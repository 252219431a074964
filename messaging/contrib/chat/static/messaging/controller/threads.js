// Threads (PROTOCOL 1.2): the panel of one root's replies, its pages
// (`room.thread`), `thread` frames, and replies sent through the outbox as
// posts with `reply_to`. Replies are messages of the room's timeline
// (model/threads.js); messages.js hands each one here to draw.
import { POST } from "../model/commands.js";
import { repliesOf, takeThread, threadPage } from "../model/threads.js";

// The most pages of one thread the panel asks for at a time (100 replies each).
const THREAD_PAGES = 10;

export class ThreadsController {
  /** `page`: controller/page.js ChatPage. */
  constructor(page) {
    this.page = page;
    this.showing = null; // {room, seq}: the thread on screen
  }

  get panel() {
    return this.page.views.thread;
  }

  /** The user opens `message`'s thread: its replies the room has, then the server's pages of them. */
  open(message) {
    const room = this.page.model.room(message.room);
    if (!room || !message.stored || message.replyTo !== null) return;
    this.showing = { room: room.slug, seq: message.seq };
    this.panel.open(room.slug, message);
    for (const reply of repliesOf(room.timeline.messages(), message.seq)) this.page.messages.draw(room, reply);
    this.ask(room, message.seq, null, 0);
  }

  close() {
    this.showing = null;
    this.panel.close();
  }

  ask(room, seq, after, pages) {
    this.page.requests.ask("room.thread", threadPage(room.slug, seq, after), {
      answered: (ack) => this.answered(room, seq, ack, pages),
      lost: () => {},
    });
  }

  /** A page of the thread: its replies in the room's timeline, drawn; the next page asked for while there is one. */
  answered(room, seq, ack, pages) {
    if (!ack.ok || !this.panel.shows(room.slug, seq)) return;
    const taken = (d) => {
      const made = room.older(d);
      if (made) return made;
      const known = room.timeline.at(d.seq);
      if (known) {
        known.applyVersion(d);
        room.extras(known, d);
      }
      return known;
    };
    const root = taken(ack.d.root);
    if (root) {
      this.panel.drawRoot(root);
      this.page.messages.draw(room, root);
    }
    for (const d of ack.d.replies) {
      const reply = taken(d);
      if (reply) this.page.messages.draw(room, reply);
    }
    const last = ack.d.replies.at(-1);
    if (ack.d.more && last && pages + 1 < THREAD_PAGES) this.ask(room, seq, last.seq, pages + 1);
  }

  /** Draw `reply` of `room` in the panel, if the panel shows its thread. */
  drawReply(room, reply, context) {
    if (this.panel.shows(room.slug, reply.replyTo)) this.panel.draw(reply, context);
  }

  /** A `thread` frame: a root's count of replies. */
  thread(d) {
    const room = this.page.model.room(d.room);
    if (!room) return;
    room.cursor.take(d.rev);
    const root = room.timeline.at(d.seq);
    if (takeThread(root, d)) this.page.messages.draw(room, root);
    this.page.rooms.checkCursor(room);
  }

  /** The panel's composer: a reply, a post of the room with `reply_to`, through the outbox. */
  send(body) {
    if (!this.showing) return;
    this.page.outbox.submit(POST, { room: this.showing.room, body, reply_to: this.showing.seq });
  }
}
