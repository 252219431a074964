// A room's change cursor (`rev`, PROTOCOL.md 1.1) and the version rule. No DOM.
//
// The cursor is the highest rev up to which the page has taken every change
// of the room, so `room.join` with `since_rev` from it brings exactly what is
// missing. A join ack says how many frames of its backlog follow it
// (`replayed`) and which rev the page is at once it has them (`rev_upto`):
// the cursor moves there when the last of them is in, not before, so a
// socket lost in the middle of a replay resumes from where it was. Live
// frames move it one rev at a time; one that skips a rev (frames of two
// server processes can cross, and a frame published while Redis was away is
// lost) is kept aside, and a gap that stays open calls for a rejoin.

// How long a skipped rev may stay missing before the page rejoins to fetch it.
export const GAP_WAIT_MS = 1000;
// Revs kept aside past a gap; past it the page rejoins at once.
export const AHEAD_LIMIT = 500;

export class RevCursor {
  constructor() {
    this.rev = null; // null until a join ack says where the page starts
    this.ahead = new Set();
    this.replayLeft = 0;
    this.upto = null;
    this.lastRev = 0;
  }

  /** What the next `room.join` adds to its `d`. */
  joinData() {
    return this.rev === null ? {} : { since_rev: this.rev };
  }

  /** A join ack's `d`. */
  joined(d) {
    if (Number.isInteger(d.last_rev)) this.lastRev = Math.max(this.lastRev, d.last_rev);
    if (!Number.isInteger(d.rev_upto)) return;
    this.upto = d.rev_upto;
    this.replayLeft = Number.isInteger(d.replayed) ? d.replayed : 0;
    if (this.replayLeft === 0) this.reach(this.upto);
  }

  /** A frame of the room that carries `rev`. */
  take(rev) {
    if (!Number.isInteger(rev)) return;
    this.lastRev = Math.max(this.lastRev, rev);
    if (this.replayLeft > 0) {
      this.replayLeft -= 1;
      if (this.replayLeft === 0) this.reach(this.upto);
      return;
    }
    if (this.rev === null || rev <= this.rev) return;
    this.ahead.add(rev);
    this.advance();
  }

  reach(rev) {
    if (this.rev === null || rev > this.rev) this.rev = rev;
    this.advance();
  }

  advance() {
    for (const rev of this.ahead) if (rev <= this.rev) this.ahead.delete(rev);
    while (this.ahead.delete(this.rev + 1)) this.rev += 1;
  }

  /** The socket is gone: a replay cut off in the middle does not count. */
  lost() {
    this.replayLeft = 0;
  }

  /** Whether the page is short of what the server said it has: "gap" (wait a little), "behind" (rejoin now), or null. */
  missing() {
    if (this.rev === null || this.replayLeft > 0) return null;
    if (this.ahead.size > AHEAD_LIMIT) return "behind";
    if (this.ahead.size > 0) return "gap";
    return this.rev < this.lastRev ? "behind" : null;
  }
}

/** Whether a change of `version` may replace what a message shows at `shown` (a client never goes back). */
export function newer(version, shown) {
  return Number.isInteger(version) && version > (shown ?? 0);
}
