// A room's members as its messages' states need them: each one's
// watermarks (delivered, read) and the seq they joined at. No DOM.
//
// The page computes a message's state as the server does (PROTOCOL.md
// "Message states"): over its recipients, the members other than its sender
// who were in the room when it was posted. In a room whose join ack listed
// only some members (more than the server's MEMBERS_ON_JOIN) the page cannot:
// states are then the server's alone (`state` frames).

export class Members {
  constructor() {
    this.all = new Map(); // user id -> {name, delivered, read, joined_seq}
    this.partial = false;
    this.total = 0; // members, as the last join ack counted them
  }

  /**
   * A join ack's `d`. Returns whether it lists members the page did not
   * know before (they joined after its last join: states computed without
   * them may have run ahead). Watermarks never go back.
   */
  joined(d) {
    // A server before `members_total` listed every member.
    this.total = d.members_total ?? d.members.length;
    this.partial = this.total > d.members.length;
    const newcomers = this.all.size > 0 && d.members.some((m) => !this.all.has(m.user));
    for (const m of d.members) {
      const known = this.all.get(m.user);
      this.all.set(m.user, {
        name: m.name,
        joined_seq: m.joined_seq,
        delivered: Math.max(m.delivered, known?.delivered ?? 0),
        read: Math.max(m.read, known?.read ?? 0),
      });
    }
    return newcomers;
  }

  /**
   * A `status` frame's `d`: a member's watermarks moved. Returns false for a
   * member the page does not know (one who joined after its join: a rejoin
   * tells when they joined, which the recipients rule needs).
   */
  status(d) {
    const member = this.all.get(d.user);
    if (!member) return false;
    member.delivered = Math.max(member.delivered, d.delivered);
    member.read = Math.max(member.read, d.read);
    return true;
  }

  /** A member's watermarks (zero for one not known). */
  watermarks(user) {
    const member = this.all.get(user);
    return { delivered: member?.delivered ?? 0, read: member?.read ?? 0 };
  }

  /** The state the server records for message `seq` of `sender`; "sent" where the page cannot tell. */
  stateOf(seq, sender) {
    if (this.partial) return "sent";
    const recipients = this.recipients(seq, sender);
    if (recipients.length === 0) return "sent";
    if (recipients.every((m) => m.read >= seq)) return "read";
    if (recipients.every((m) => m.delivered >= seq)) return "delivered";
    return "sent";
  }

  /** The ids of the members other than `sender` who have read message `seq`. */
  readers(seq, sender) {
    return [...this.all].filter(([id, m]) => id !== sender && m.read >= seq).map(([id]) => id);
  }

  nameOf(user) {
    return this.all.get(user)?.name ?? null;
  }

  recipients(seq, sender) {
    return [...this.all].filter(([id, m]) => id !== sender && m.joined_seq < seq).map(([, m]) => m);
  }
}
