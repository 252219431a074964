// What this user has seen of a room, and what the server has been told of
// it: the page's read mark and the watermarks its receipts reported. No DOM.
//
// The page reports `delivered` up to what it shows and `read` up to what was
// on screen in a focused, visible tab, as cumulative watermarks (PROTOCOL.md
// "receipt"): repeating one is harmless, so a refused receipt is simply
// reported again.

export class Receipts {
  constructor() {
    this.readMark = 0;
    this.reported = { delivered: 0, read: 0 };
  }

  /** Messages `seqs` were on screen; only those up to `shown` count. Whether the read mark moved. */
  read(seqs, shown) {
    let mark = this.readMark;
    for (const seq of seqs) if (shown !== null && seq <= shown) mark = Math.max(mark, seq);
    if (mark <= this.readMark) return false;
    this.readMark = mark;
    return true;
  }

  /** A join ack: the server's watermarks of this user are what it has been told. */
  joined({ delivered, read }) {
    this.reported = { delivered, read };
  }

  /**
   * The `d` of the receipt due for `room` now that every message up to
   * `shown` is in, or null when the server has been told all of it.
   */
  due(room, shown) {
    if (shown === null) return null;
    const d = { room };
    if (shown > this.reported.delivered) d.delivered = shown;
    if (this.readMark > this.reported.read) d.read = this.readMark;
    return d.delivered === undefined && d.read === undefined ? null : d;
  }

  /** Receipt `d` went out: what it says counts as told (watermarks only grow). */
  sent(d) {
    this.reported = {
      delivered: Math.max(this.reported.delivered, d.delivered ?? 0),
      read: Math.max(this.reported.read, d.read ?? 0),
    };
  }

  /** A receipt was refused: nothing it said counts as told. */
  refused() {
    this.reported = { delivered: 0, read: 0 };
  }
}
