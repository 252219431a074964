// Scroll-back's state for one room: `room.history` pages of older messages.
// No DOM.
//
// A page may hold fewer messages than it asked for (what fits in one frame:
// PROTOCOL 1.2); only `more: false` says there are no older ones. One page
// is asked for at a time; one whose answer is lost may be asked again.
export const HISTORY_PAGE = 50;

export class Paging {
  constructor() {
    this.loading = false; // a page is asked for and not answered
    this.noOlder = false; // the server said there is nothing older
  }

  /** Whether messages older than `oldest` (the lowest seq held) may exist. */
  mayHaveOlder(oldest) {
    return !this.noOlder && oldest !== null && oldest > 1;
  }

  /** The `room.history` `d` of the next page, or null if none is due. */
  next(room, oldest) {
    if (this.loading || !this.mayHaveOlder(oldest)) return null;
    return { room, before: oldest, limit: HISTORY_PAGE };
  }

  sent() {
    this.loading = true;
  }

  /** The page came: `more` is the server's word on older messages. */
  answered(more) {
    this.loading = false;
    if (!more) this.noOlder = true;
  }

  /** Refused, or its answer lost with the connection: it may be asked again. */
  failed() {
    this.loading = false;
  }
}
