// The people of each room, as its members panel shows them: members with
// presence, who is typing, whether the room is private and whose, the other
// person of a direct room; and this user's own typing. No DOM, no timers:
// times come in as `now` (milliseconds).
export const TYPING_REPEAT_MS = 3000; // PROTOCOL.md: clients repeat `typing: true` every 3 s
export const TYPING_LAPSE_MS = 6000; // ...and it lapses after 6 s: the page's own fallback

export class RoomPeople {
  constructor() {
    this.members = new Map(); // user id -> {name, node, online}; `node`: the user's deployment (federation)
    this.private = false;
    this.owner = null;
    this.with = null; // a direct room: the other person ({id, name})
    this.typists = new Map(); // user id -> {name, until}
    this.refreshing = false; // a `room.members` page is asked for
  }
}

export class People {
  constructor(me) {
    this.me = me;
    this.rooms = new Map(); // slug -> RoomPeople
    this.typingIn = null; // the room this user's `typing: true` was last sent to
    this.typingSentAt = 0;
  }

  /** The room's people, added if new. */
  room(slug) {
    let room = this.rooms.get(slug);
    if (!room) {
      room = new RoomPeople();
      this.rooms.set(slug, room);
    }
    return room;
  }

  get(slug) {
    return this.rooms.get(slug) ?? null;
  }

  drop(slug) {
    this.rooms.delete(slug);
  }

  /** What the server says of a room (`rooms.list` entry, `dm.open` answer): private, and with whom. */
  describe(slug, { private: isPrivate, with: other }) {
    const room = this.room(slug);
    if (typeof isPrivate === "boolean") room.private = isPrivate;
    room.with = other ?? null;
    return room;
  }

  /** A join ack's `d`: its members (with `online`), and whether the room is private and whose. */
  joined(slug, d) {
    const room = this.room(slug);
    if (typeof d.private === "boolean") room.private = d.private;
    room.owner = d.owner ?? null;
    for (const m of d.members) room.members.set(m.user, { name: m.name, node: m.node ?? null, online: m.online === true });
  }

  /** The first page of `room.members`: the members as the panel lists them. */
  membersPage(slug, members) {
    const room = this.get(slug);
    if (room) {
      room.members = new Map(members.map((m) => [m.user, { name: m.name, node: m.node ?? null, online: m.online === true }]));
    }
  }

  /** A `presence` frame's `d`: "changed", "unknown" (a member the panel does not list: ask again), or null. */
  presence(d) {
    const room = this.get(d.room);
    if (!room) return null;
    const member = room.members.get(d.user);
    if (!member) return "unknown";
    member.online = d.online;
    return "changed";
  }

  /** A `typing` frame's `d` at `now`: whether it changes who is shown typing. */
  typing(d, now) {
    if (d.user === this.me) return false;
    const room = this.room(d.room);
    if (d.typing) {
      // Lapses here too, should the server's `false` be lost with a connection.
      room.typists.set(d.user, { name: d.name, until: now + TYPING_LAPSE_MS });
      return true;
    }
    return room.typists.delete(d.user);
  }

  /**
   * A message from `sender` was stored: their typing in the room ends,
   * whichever server process stored it. Returns whether the panel should
   * ask for its members again (a sender it does not list).
   */
  posted(slug, sender) {
    const room = this.get(slug);
    if (!room) return false;
    room.typists.delete(sender);
    return !room.members.has(sender);
  }

  /** The names of those typing in `slug` at `now` (lapsed ones gone). */
  typists(slug, now) {
    const room = this.get(slug);
    if (!room) return [];
    for (const [user, typist] of room.typists) if (typist.until <= now) room.typists.delete(user);
    return [...room.typists.values()].map((typist) => typist.name);
  }

  /** A keystroke in `slug` at `now`: the `typing` `d` to send (at most every 3 s; an empty composer stops), or null. */
  typed(slug, text, now) {
    if (!slug) return null;
    if (!text.trim()) return this.stopped();
    if (this.typingIn === slug && now - this.typingSentAt < TYPING_REPEAT_MS) return null;
    this.typingIn = slug;
    this.typingSentAt = now;
    return { room: slug, typing: true };
  }

  /** This user stopped typing (sent, emptied the composer, left the room): the `d` to send, or null. */
  stopped() {
    const slug = this.typingIn;
    if (!slug) return null;
    this.typingIn = null;
    this.typingSentAt = 0;
    return { room: slug, typing: false };
  }

  /** Whether this user invites to `slug` here: a private room's owner (staff use the admin or the protocol). */
  invites(slug) {
    const room = this.get(slug);
    return Boolean(room && room.private && room.owner === this.me && !room.with);
  }
}
