// Emoji reactions of a room's messages (PROTOCOL 1.2 `reaction.set`). No DOM.
//
// Per message (seq), each emoji's count as the server told it, and this
// user's own emoji. Counts come from `reactions` frames (each with its rev:
// one older than the rev held for that emoji is dropped) and from the
// `reactions` of a stored message's `d` (a backlog, a history, a thread or
// a search page), which is its whole state then; `mine` from those pages'
// `mine` and from this user's acked `reaction.set`. A count of 0 is gone.

/** The emoji the picker offers. */
export const PICKER = Object.freeze(["👍", "❤️", "😂", "🎉", "😮", "👀"]);

export class EmojiReactions {
  constructor() {
    this.byMessage = new Map(); // seq -> {counts: Map(emoji -> count), revs: Map(emoji -> rev), mine: Set}
  }

  entry(seq) {
    let entry = this.byMessage.get(seq);
    if (!entry) {
      entry = { counts: new Map(), revs: new Map(), mine: new Set() };
      this.byMessage.set(seq, entry);
    }
    return entry;
  }

  /** A stored message's `d`: its reactions and the viewer's own, where it carries them; whether anything changed. */
  fromMessage(d) {
    if (!Number.isInteger(d.seq)) return false;
    if (d.deleted === true) return this.forget(d.seq);
    const reactions = d.reactions && typeof d.reactions === "object" ? d.reactions : null;
    if (!reactions && !this.byMessage.has(d.seq)) return false;
    const entry = this.entry(d.seq);
    entry.counts = new Map(Object.entries(reactions ?? {}).filter(([, count]) => Number.isInteger(count) && count > 0));
    if (Array.isArray(d.mine)) entry.mine = new Set(d.mine.filter((emoji) => typeof emoji === "string"));
    else if (!reactions) entry.mine = new Set();
    return true;
  }

  /** A `reactions` frame's `d`; whether it changed what is shown. */
  take({ seq, emoji, count, rev }) {
    if (!Number.isInteger(seq) || typeof emoji !== "string" || !Number.isInteger(count)) return false;
    const entry = this.entry(seq);
    if (Number.isInteger(rev) && rev <= (entry.revs.get(emoji) ?? 0)) return false;
    if (Number.isInteger(rev)) entry.revs.set(emoji, rev);
    if (count > 0) entry.counts.set(emoji, count);
    else entry.counts.delete(emoji);
    if (count === 0) entry.mine.delete(emoji);
    return true;
  }

  /** This user's `reaction.set` was applied: `on` is now theirs; the ack's count where no frame told a later one. */
  acked({ seq, emoji, on, count }) {
    const entry = this.entry(seq);
    if (on) entry.mine.add(emoji);
    else entry.mine.delete(emoji);
    if (Number.isInteger(count) && !entry.revs.has(emoji)) {
      if (count > 0) entry.counts.set(emoji, count);
      else entry.counts.delete(emoji);
    }
  }

  /** Message `seq` is gone (deleted): its reactions with it; whether it had any. */
  forget(seq) {
    return this.byMessage.delete(seq);
  }

  mine(seq, emoji) {
    return this.byMessage.get(seq)?.mine.has(emoji) ?? false;
  }

  /** What message `seq` shows: `[{emoji, count, mine}]`, in the order the emoji came. */
  of(seq) {
    const entry = this.byMessage.get(seq);
    if (!entry) return [];
    return [...entry.counts].map(([emoji, count]) => ({ emoji, count, mine: entry.mine.has(emoji) }));
  }
}

/**
 * Whether a click on `emoji` of message `seq` puts it on: the opposite of
 * the user's latest `reaction.set` of it still in the outbox (`entries`),
 * else of what the server says is theirs.
 */
export function wantsOn(reactions, entries, room, seq, emoji) {
  const pending = entries.findLast(
    (entry) => entry.t === "reaction.set" && entry.d.room === room && entry.d.seq === seq && entry.d.emoji === emoji,
  );
  return pending ? !pending.d.on : !reactions.mine(seq, emoji);
}
