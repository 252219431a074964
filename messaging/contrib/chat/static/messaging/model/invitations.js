// Invitations (PROTOCOL 1.2): rooms the user is asked to join, from
// `rooms.list` entries with `invited: true`. Nothing of such a room is
// shown until the user accepts; declining sends `room.leave`. No DOM.

export class Invitations {
  constructor() {
    this.entries = new Map(); // slug -> {entry: the rooms.list entry, answering, note}
  }

  /** A `rooms.list` answer's `rooms`: the invitations are exactly those it lists. */
  listed(rooms) {
    const invited = rooms.filter((r) => r.invited === true);
    for (const slug of this.entries.keys()) if (!invited.some((r) => r.room === slug)) this.entries.delete(slug);
    for (const r of invited) {
      if (!this.entries.has(r.room)) this.entries.set(r.room, { entry: r, answering: false, note: "" });
    }
  }

  get(slug) {
    return this.entries.get(slug) ?? null;
  }

  /** Accepted or declined: no second answer until this one is back. Whether it may be sent. */
  answering(slug) {
    const invitation = this.entries.get(slug);
    if (!invitation || invitation.answering) return false;
    invitation.answering = true;
    return true;
  }

  /** The answer was refused (or lost): it may be given again, and `note` says why (null: the note stays). */
  refused(slug, note = null) {
    const invitation = this.entries.get(slug);
    if (!invitation) return;
    invitation.answering = false;
    if (note !== null) invitation.note = note;
  }

  /** Accepted, declined, withdrawn: gone. */
  drop(slug) {
    return this.entries.delete(slug);
  }
}

/** What an invitation says: who asks, to what. */
export function invitationText(r) {
  if (r.with) return `${r.with.name} wants to message you`;
  return `# ${r.room}${r.by ? `, from ${r.by.name}` : ""}`;
}
