// Search: `room.search` in the user's rooms, page by page (`before`: the
// `at` of the last result); a result opens its room at the message
// (controller/messages.js `reveal`). A search is safe to ask again: one the
// connection could not carry or answer waits for it and goes out once it
// is back (at most one waits: the latest).

export class SearchController {
  /** `page`: controller/page.js ChatPage. */
  constructor(page) {
    this.page = page;
    this.q = null;
    this.last = null; // the last result shown: where "more" goes on from
    this.asking = null;
    this.waiting = null; // the `d` of a search waiting for the connection
  }

  get view() {
    return this.page.views.search;
  }

  search(q) {
    this.q = q;
    this.last = null;
    this.ask({ q }, true);
  }

  more() {
    if (this.q && this.last) this.ask({ q: this.q, before: this.last.at }, false);
  }

  ask(d, fresh) {
    this.view.searching(fresh);
    this.waiting = null;
    const id = this.page.requests.ask("room.search", d, {
      answered: (ack) => this.answered(id, ack),
      // An `error` frame naming it: refused on a live connection, said as such.
      lost: (error) => this.asking === id && (error ? this.view.failed(error.message || error.code) : this.wait(d)),
    });
    this.asking = id;
    if (id === null) this.wait(d);
  }

  wait(d) {
    this.asking = null;
    this.waiting = d;
    this.view.waiting();
  }

  /** The connection is back: the search that waited for it goes out. */
  opened() {
    if (this.waiting) this.ask(this.waiting, false);
  }

  /** The search box cleared: nothing is asked or waits any more. */
  cancel() {
    this.q = null;
    this.asking = null;
    this.waiting = null;
  }

  answered(id, ack) {
    if (id !== this.asking) return; // a newer search was asked
    if (!ack.ok) {
      this.view.failed(ack.error.message || ack.error.code);
      return;
    }
    const { results, more } = ack.d;
    if (results.length) this.last = results.at(-1);
    this.view.show(results, more);
  }

  /** A result clicked: its room opens (joined if this page had not), at the message. */
  async open(d) {
    await this.page.rooms.open(d.room);
    const room = this.page.model.room(d.room);
    if (room) this.page.messages.reveal(room, d.seq);
  }
}
