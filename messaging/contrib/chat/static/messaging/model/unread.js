// Unread counts: a room's badge in the sidebar, and where its "New
// messages" divider goes as it opens. No DOM.
//
// The server's count (a join ack's `unread`, `rooms.list`) is exact for its
// read watermark and the room's last seq when it counted; the page adds the
// messages that came since (someone else's, not deleted, above its read
// mark) and asks the server again (`rooms.list`) when its receipts moved the
// watermark or a message was deleted.
//
// The divider is drawn once per opening of a room, above the first unread
// message as the room opens: once the server's count is known and the
// backlog of the join is in, not before (the first unread may be in it).

export class Unread {
  constructor() {
    this.known = false;
    this.read = 0; // the server's read watermark when it counted
    this.lastSeq = 0; // the room's last seq when it counted
    this.unread = 0; // its count: others' messages, not deleted, in (read, lastSeq]
    this.first = null; // its first unread seq, where it said
    this.dividerDue = false; // the room opened: its divider waits to be drawn
  }

  /** The server's count: a join ack's `unread`, `first_unread` and `last_seq` with the member's `read`, or a `rooms.list` entry. */
  baseline({ unread, first_unread: first, read, last_seq: lastSeq }) {
    if (!Number.isInteger(unread)) return;
    Object.assign(this, { known: true, unread, read: read ?? 0, lastSeq: lastSeq ?? 0 });
    if (first !== undefined) this.first = first;
  }

  /**
   * The count now. `held`: the room's messages by seq; `readMark`: the
   * page's read mark. Exact but in one short case: while the page's read
   * mark is between the server's watermark and `lastSeq` (its receipt is
   * on the way), what the page shows of that range is counted, and the
   * next count of the server's corrects it.
   */
  count(held, readMark, isUnread) {
    if (!this.known) return 0;
    const mark = Math.max(this.read, readMark);
    let n = 0;
    if (readMark <= this.read) n = this.unread;
    else if (readMark < this.lastSeq) {
      for (const [seq, message] of held) if (seq > readMark && seq <= this.lastSeq && isUnread(message)) n += 1;
    }
    for (const [seq, message] of held) if (seq > Math.max(mark, this.lastSeq) && isUnread(message)) n += 1;
    return n;
  }

  /** The lowest unread seq: the server's, or the lowest the page holds past its marks. */
  firstUnread(held, readMark, isUnread) {
    const mark = Math.max(this.read, readMark);
    let first = null;
    for (const [seq, message] of held) if (seq > mark && isUnread(message) && (first === null || seq < first)) first = seq;
    if (Number.isInteger(this.first) && this.first > mark && (first === null || this.first < first)) return this.first;
    return first;
  }

  /** The room is opening: its divider is to be drawn (`divider`). */
  opened() {
    this.dividerDue = true;
  }

  /**
   * Where the divider goes, once it is due and can be told: `{seq}` (null:
   * nothing unread) the one time it is, undefined before and after.
   * `replaying`: frames of the join's backlog are still on their way.
   */
  divider(held, readMark, isUnread, replaying) {
    if (!this.dividerDue || !this.known || replaying) return undefined;
    this.dividerDue = false;
    return { seq: this.firstUnread(held, readMark, isUnread) };
  }
}
