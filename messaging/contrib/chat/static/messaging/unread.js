// Unread counts on the page: a badge per room in the sidebar and the
// "New messages" divider above the first unread message of a room as it opens.
//
// The server's count (a join ack's `unread`, `rooms.list`) is exact for its
// read watermark and the room's last seq when it counted; the page adds the
// messages that came since (someone else's, not deleted, above its read
// mark) and asks the server again (`rooms.list`) when its receipts moved the
// watermark or a message was deleted.

export class Unread {
  constructor() {
    this.known = false;
    this.read = 0; // the server's read watermark when it counted
    this.lastSeq = 0; // the room's last seq when it counted
    this.unread = 0; // its count: others' messages, not deleted, in (read, lastSeq]
    this.first = null; // its first unread seq, where it said
  }

  /** The server's count: a join ack's `unread`, `first_unread` and `last_seq` with the member's `read`, or a `rooms.list` entry. */
  baseline({ unread, first_unread: first, read, last_seq: lastSeq }) {
    if (!Number.isInteger(unread)) return;
    Object.assign(this, { known: true, unread, read: read ?? 0, lastSeq: lastSeq ?? 0 });
    if (first !== undefined) this.first = first;
  }

  /**
   * The count now. `held`: the room's bubbles by seq; `readMark`: the
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
      for (const [seq, bubble] of held) if (seq > readMark && seq <= this.lastSeq && isUnread(bubble)) n += 1;
    }
    for (const [seq, bubble] of held) if (seq > Math.max(mark, this.lastSeq) && isUnread(bubble)) n += 1;
    return n;
  }

  /** The lowest unread seq: the server's, or the lowest the page holds past its marks. */
  firstUnread(held, readMark, isUnread) {
    const mark = Math.max(this.read, readMark);
    let first = null;
    for (const [seq, bubble] of held) if (seq > mark && isUnread(bubble) && (first === null || seq < first)) first = seq;
    if (Number.isInteger(this.first) && this.first > mark && (first === null || this.first < first)) return this.first;
    return first;
  }
}

/** The sidebar's badge element: `[data-testid=unread]`, hidden at zero. */
export function badge() {
  const node = document.createElement("span");
  node.className = "unread";
  node.dataset.testid = "unread";
  node.hidden = true;
  return node;
}

export function showBadge(node, count) {
  node.textContent = String(count);
  node.hidden = count === 0;
  node.setAttribute("aria-label", `${count} unread`);
}

/** The divider above the first unread message; null when there is none to mark. */
export function placeDivider(list, seq) {
  list.querySelector("[data-testid=first-unread]")?.remove();
  if (seq === null) return null;
  const divider = document.createElement("li");
  divider.className = "first-unread";
  divider.dataset.testid = "first-unread";
  divider.textContent = "New messages";
  divider.setAttribute("role", "separator");
  let before = null;
  for (const node of list.children) {
    if (node.dataset.seq && Number(node.dataset.seq) >= seq) {
      before = node;
      break;
    }
  }
  if (before === null) return null;
  list.insertBefore(divider, before);
  return divider;
}
