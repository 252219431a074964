// Scroll-back: `room.history` pages, older messages put in above what is
// shown, the scroll position kept (the user's place does not jump). A page
// may hold fewer than it asked for (what fits in one frame: PROTOCOL 1.2);
// only `more` says whether older ones exist, and while the list is still at
// its top (or does not fill the box) the next page is asked for at once.
export const HISTORY_PAGE = 50;
// How close to the top (px) a scroll asks for the next page.
const NEAR_TOP = 40;

export class History {
  constructor({ container, button, send }) {
    Object.assign(this, { container, button, send });
    this.requests = new Map(); // id -> room
    button.addEventListener("click", () => this.current && this.load(this.current));
    container.addEventListener("scroll", () => {
      if (this.current && container.scrollTop < NEAR_TOP) this.load(this.current);
    });
    this.current = null;
  }

  /** The room on screen; the button shows while it may have older messages. */
  show(room) {
    this.current = room;
    this.update();
  }

  update() {
    const room = this.current;
    this.button.hidden = !room || room.noOlder || room.oldestSeq() === null || room.oldestSeq() <= 1;
    this.button.disabled = Boolean(room?.loadingOlder);
  }

  load(room) {
    const oldest = room.oldestSeq();
    if (room.loadingOlder || room.noOlder || oldest === null || oldest <= 1) return;
    const id = crypto.randomUUID();
    if (!this.send({ id, t: "room.history", d: { room: room.slug, before: oldest, limit: HISTORY_PAGE } })) return;
    room.loadingOlder = true;
    this.requests.set(id, room);
    this.update();
  }

  /** An ack of one of its requests: `insert(room, d)` puts each message in; true if it was one. */
  answered(frame, insert) {
    const room = this.requests.get(frame.id);
    if (!room) return false;
    this.requests.delete(frame.id);
    room.loadingOlder = false;
    if (frame.ok) {
      // Keep what is on screen where it is: the page grows above it.
      const before = this.container.scrollHeight;
      const top = this.container.scrollTop;
      const oldest = room.oldestSeq();
      for (const d of frame.d.messages) insert(room, d);
      if (room === this.current) this.container.scrollTop = top + (this.container.scrollHeight - before);
      if (!frame.d.more) room.noOlder = true;
      // A short page may leave the list at its top, where no scroll comes to ask
      // again; go on, as long as each page brings older messages.
      else if (room === this.current && room.oldestSeq() < oldest && this.atTop()) queueMicrotask(() => this.load(room));
    }
    this.update();
    return true;
  }

  /** An error frame naming one of its requests (the server could not send the answer): it may be asked again. */
  failed(frame) {
    const room = this.requests.get(frame.error?.id);
    if (!room) return false;
    this.requests.delete(frame.error.id);
    room.loadingOlder = false;
    this.update();
    return true;
  }

  atTop() {
    const box = this.container;
    return box.scrollTop < NEAR_TOP || box.scrollHeight <= box.clientHeight;
  }

  /** The socket is gone: requests in flight will not be answered. */
  lost() {
    for (const room of this.requests.values()) room.loadingOlder = false;
    this.requests.clear();
    this.update();
  }
}
