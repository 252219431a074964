// People: the members panel with presence, who is typing, invitations
// (nothing of a room is shown before the user accepts), direct rooms, and
// the invite control of a private room the user owns. Its commands are not
// the outbox's: typing is ephemeral, and the others are safe to repeat or
// to do again. What it knows is the model's (model/people.js,
// model/invitations.js).
import { TYPING_LAPSE_MS } from "../model/people.js";

// No frame tells a room that someone joined it: the panel asks again this often
// while it is shown, and at once on a sign of a member it does not know.
const MEMBERS_REFRESH_MS = 10000;

const reason = (ack) => ack.error.message || ack.error.code;

export class PeopleController {
  /** `page`: controller/page.js ChatPage. */
  constructor(page) {
    this.page = page;
    setInterval(() => this.model.current && this.refreshMembers(this.model.current.slug), MEMBERS_REFRESH_MS);
  }

  get model() {
    return this.page.model;
  }

  get people() {
    return this.page.model.people;
  }

  get invitations() {
    return this.page.model.invitations;
  }

  get current() {
    return this.model.current?.slug ?? null;
  }

  ask(t, d, handlers) {
    return this.page.requests.ask(t, d, handlers);
  }

  // Rooms and invitations -------------------------------------------------------

  /**
   * Learn the user's rooms (direct rooms, rooms joined elsewhere) and add those
   * the page does not show; list the invitations apart, without joining them.
   */
  listRooms() {
    this.ask("rooms.list", {}, {
      answered: async (ack) => {
        if (!ack.ok) return;
        this.invitations.listed(ack.d.rooms);
        this.drawInvitations();
        for (const r of ack.d.rooms) if (r.invited !== true) await this.openRoom(r.room, r, { select: false });
      },
    });
  }

  /** Add room `slug` (`r`: what the server says of it) to the page, listed as direct if it is. */
  async openRoom(slug, r, { select }) {
    this.people.describe(slug, r);
    await this.page.rooms.open(slug, { select: false });
    if (r.with) this.page.rooms.direct(slug, r.with.name);
    if (select) await this.page.rooms.open(slug, { select: true });
  }

  /** Accept: the join makes the user a member; then the room opens like any other. */
  accept(slug) {
    const r = this.invitations.get(slug)?.entry;
    if (!r || !this.invitations.answering(slug)) return;
    this.drawInvitations();
    const sent = this.ask("room.join", { room: slug }, {
      answered: async (ack) => {
        if (!ack.ok) return this.unanswered(slug, `Not joined: ${reason(ack)}`);
        this.invitations.drop(slug);
        this.drawInvitations();
        await this.openRoom(slug, r, { select: true });
      },
      lost: () => this.unanswered(slug),
    });
    if (!sent) this.unanswered(slug);
  }

  /** Decline (`room.leave`): the entry goes, whatever the answer (a refusal means it was gone already). */
  decline(slug) {
    if (!this.invitations.answering(slug)) return;
    this.drawInvitations();
    const gone = () => {
      this.invitations.drop(slug);
      this.drawInvitations();
    };
    const sent = this.ask("room.leave", { room: slug }, { answered: gone, lost: () => this.unanswered(slug) });
    if (!sent) this.unanswered(slug);
  }

  /** The answer did not go through: it may be given again; `note` says why (null: as it was). */
  unanswered(slug, note = null) {
    this.invitations.refused(slug, note);
    this.drawInvitations();
  }

  drawInvitations() {
    this.page.views.invitations.draw(this.invitations);
  }

  /** A `room.left` frame: left, removed, declined, or an invitation withdrawn. */
  left(d) {
    this.invitations.drop(d.room);
    this.drawInvitations();
    this.page.rooms.drop(d.room);
  }

  /** "Message" on a member: open (or find) the direct room, and show it. */
  openDirect(userId) {
    this.ask("dm.open", { user: userId }, {
      answered: async (ack) => {
        if (ack.ok) await this.openRoom(ack.d.room, { private: true, with: ack.d.with }, { select: true });
      },
    });
  }

  /** Create a private room (exactly once on the server); `done(ack)`. */
  createPrivate(slug, done) {
    this.ask("room.create", { room: slug, private: true }, {
      answered: (ack) => {
        if (ack.ok) this.people.room(slug).private = true;
        done(ack);
      },
    });
  }

  /** The invite form: `text` is the user's id. An invitation: the user joins once they accept it. */
  invite(text) {
    const slug = this.current;
    if (!slug || !text) return;
    const user = /^\d+$/.test(text) ? Number(text) : text;
    this.ask("room.invite", { room: slug, user }, {
      answered: (ack) => {
        this.page.views.people.invited(ack.ok, ack.ok ? null : reason(ack));
        if (ack.ok) this.refreshMembers(ack.d.room);
      },
    });
  }

  // Members and presence ------------------------------------------------------------

  /** The first page of the room's members (`room.members`), as the panel shows them. */
  refreshMembers(slug) {
    const room = this.people.get(slug);
    if (!room || room.refreshing) return;
    const sent = this.ask("room.members", { room: slug }, {
      answered: (ack) => {
        room.refreshing = false;
        if (!ack.ok) return;
        this.people.membersPage(slug, ack.d.members);
        if (slug === this.current) this.draw();
      },
      lost: () => {
        room.refreshing = false;
      },
    });
    if (sent) room.refreshing = true;
  }

  /** A join's ack: the members (with `online`), and whether the room is private and whose. */
  joined(slug, d) {
    this.people.joined(slug, d);
    if (slug === this.current) this.draw();
  }

  presence(d) {
    const seen = this.people.presence(d);
    if (seen === "unknown") this.refreshMembers(d.room);
    else if (seen === "changed" && d.room === this.current) this.draw();
  }

  /** A message from `sender` was stored in `slug`: their typing there ends; one the panel does not list makes it ask. */
  posted(slug, sender) {
    if (this.people.posted(slug, sender)) this.refreshMembers(slug);
    if (slug === this.current) this.drawTyping();
  }

  /** The room now on screen (null: none). */
  show(slug) {
    if (this.people.typingIn && this.people.typingIn !== slug) this.stopped();
    this.draw();
    this.drawTyping();
    if (slug) this.refreshMembers(slug);
  }

  draw() {
    const slug = this.current;
    this.page.views.people.draw(this.people.get(slug), { invites: this.people.invites(slug) });
  }

  // Typing ------------------------------------------------------------------------

  typing(d) {
    if (!this.people.typing(d, Date.now())) return;
    if (d.room === this.current) this.drawTyping();
    // Drawn again once it lapses, should no `false` come.
    if (d.typing) setTimeout(() => this.drawTyping(), TYPING_LAPSE_MS + 1);
  }

  drawTyping() {
    this.page.views.people.typing(this.people.typists(this.current, Date.now()));
  }

  /** A keystroke in the composer. */
  typed(text) {
    const d = this.people.typed(this.current, text, Date.now());
    if (d) this.ask("typing", d);
  }

  /** The user stopped typing (sent the message, emptied the composer, left the room). */
  stopped() {
    const d = this.people.stopped();
    if (d) this.ask("typing", d);
  }
}
