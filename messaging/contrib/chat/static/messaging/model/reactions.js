// Reaction counts of a room's messages. No DOM.
//
// The count shown is always the server's: the highest it has told (acks of
// `reaction.add` and `reaction` frames, which may come in any order), never
// one the page added ahead of it. Per-emoji reactions (PROTOCOL.md "Page
// hooks (1.2)") key the same rule by (seq, emoji), with the user's own.

export class ReactionCounts {
  constructor() {
    this.counts = new Map(); // seq -> highest "+1" count told
  }

  /** A count the server told for message `seq`; whether it is higher than the one held. */
  take(seq, count) {
    if (!Number.isInteger(count) || count <= this.of(seq)) return false;
    this.counts.set(seq, count);
    return true;
  }

  of(seq) {
    return this.counts.get(seq) ?? 0;
  }
}
