// The people of the chat page: the members panel with presence dots and a
// "Message" button (dm.open), who is typing, invitations (each asks the user
// to accept or decline: nothing of the room is shown before they accept),
// direct rooms listed under the other person's name, and the invite control
// of a private room the user owns. chat.js calls it at a few points (a join's ack, a room shown, a
// frame, a keystroke); it sends its own commands, which are not the outbox's:
// typing is ephemeral, and the others are safe to repeat or to do again.
// User text only ever goes through textContent.

const TYPING_REPEAT_MS = 3000; // PROTOCOL.md: clients repeat `typing: true` every 3 s
const TYPING_LAPSE_MS = 6000; // ...and it lapses after 6 s: the page's own fallback
// No frame tells a room that someone joined it: the panel asks again this often
// while it is shown, and at once on a sign of a member it does not know.
const MEMBERS_REFRESH_MS = 10000;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

export class People {
  /**
   * `send(frame)` puts a frame on the socket (false if it is closed);
   * `openRoom(slug, {select})` adds a room to the page and joins it;
   * `labelDirect(slug, name)` lists a room apart as a direct conversation;
   * `dropRoom(slug)` takes a room the user left or was removed from off the page.
   */
  constructor({ me, send, openRoom, labelDirect, dropRoom }) {
    Object.assign(this, { me, send, openRoom, labelDirect, dropRoom });
    this.ui = {
      members: document.querySelector("[data-testid=members]"),
      panel: document.querySelector(".people"),
      typing: document.querySelector("[data-testid=typing]"),
      inviteForm: document.querySelector("[data-testid=invite-form]"),
      inviteUser: document.querySelector("[data-testid=invite-user]"),
      inviteNote: document.querySelector("[data-testid=invite-note]"),
      invitations: document.querySelector("[data-testid=invitations]"),
      invitationsTitle: document.querySelector("[data-testid=invitations-title]"),
    };
    this.invitations = new Map(); // slug -> its [data-testid=invitation] entry
    this.rooms = new Map(); // slug -> {members: Map(id -> {name, online}), private, owner, typists: Map}
    this.pending = new Map(); // command id -> what to do with its ack
    this.current = null;
    this.typingIn = null; // the room this user's `typing: true` was last sent to
    this.typingSentAt = 0;
    this.ui.inviteForm.addEventListener("submit", (event) => {
      event.preventDefault();
      this.invite();
    });
    setInterval(() => this.current && this.refreshMembers(this.current), MEMBERS_REFRESH_MS);
  }

  /** The first page of the room's members (`room.members`), as the panel shows them. */
  refreshMembers(slug) {
    const room = this.rooms.get(slug);
    if (!room || room.refreshing) return;
    room.refreshing = true;
    this.call("room.members", { room: slug }, (ack) => {
      room.refreshing = false;
      if (!ack.ok) return;
      room.members = new Map(ack.d.members.map((m) => [m.user, { name: m.name, online: m.online === true }]));
      if (slug === this.current) this.render();
    });
  }

  room(slug) {
    let room = this.rooms.get(slug);
    if (!room) {
      room = { members: new Map(), private: false, owner: null, typists: new Map() };
      this.rooms.set(slug, room);
    }
    return room;
  }

  call(t, d, then) {
    const id = crypto.randomUUID();
    if (this.send({ id, t, d })) this.pending.set(id, then);
    return id;
  }

  /** An ack of one of this module's commands; whether it was one. */
  onAck(frame) {
    const then = this.pending.get(frame.id);
    if (!then) return false;
    this.pending.delete(frame.id);
    then(frame);
    return true;
  }

  /** A frame this module handles; whether it was one. */
  onFrame(frame) {
    const d = frame.d;
    if (frame.t === "presence") this.onPresence(d);
    else if (frame.t === "typing") this.onTyping(d);
    else if (frame.t === "invited") this.listRooms();
    else if (frame.t === "room.left") {
      // Left, removed, declined, or an invitation withdrawn.
      this.dropInvitation(d.room);
      this.rooms.delete(d.room);
      this.dropRoom(d.room);
      if (this.current === d.room) this.show(null);
    } else return false;
    return true;
  }

  // Rooms -------------------------------------------------------------------

  /**
   * Learn the user's rooms (direct rooms, rooms joined elsewhere) and add those
   * the page does not show; list the invitations apart, without joining them.
   */
  listRooms() {
    this.call("rooms.list", {}, async (ack) => {
      if (!ack.ok) return;
      const invited = ack.d.rooms.filter((r) => r.invited === true);
      for (const slug of this.invitations.keys()) {
        if (!invited.some((r) => r.room === slug)) this.dropInvitation(slug);
      }
      for (const r of invited) this.showInvitation(r);
      for (const r of ack.d.rooms) {
        if (r.invited === true) continue;
        const room = this.room(r.room);
        room.private = r.private;
        room.with = r.with ?? null;
        await this.openRoom(r.room, { select: false });
        if (r.with) this.labelDirect(r.room, r.with.name);
      }
    });
  }

  // Invitations ------------------------------------------------------------------

  /** A `rooms.list` entry with `invited: true`: who asks, to what, and the two answers. */
  showInvitation(r) {
    if (this.invitations.has(r.room)) return;
    const item = el("li", "invitation");
    item.dataset.testid = "invitation";
    item.dataset.room = r.room;
    const text = r.with
      ? `${r.with.name} wants to message you`
      : `# ${r.room}${r.by ? `, from ${r.by.name}` : ""}`;
    const accept = el("button", "accept", "Accept");
    const decline = el("button", "decline", "Decline");
    const note = el("p", "hint");
    note.setAttribute("role", "status");
    for (const [button, testid, label] of [[accept, "accept", "Accept"], [decline, "decline", "Decline"]]) {
      button.type = "button";
      button.dataset.testid = testid;
      button.setAttribute("aria-label", `${label}: ${text}`);
    }
    accept.addEventListener("click", () => this.accept(r, [accept, decline], note));
    decline.addEventListener("click", () => this.decline(r.room, [accept, decline]));
    const row = el("div", "row");
    row.append(accept, decline);
    item.append(el("p", "invitation-text", text), row, note);
    this.invitations.set(r.room, item);
    this.ui.invitations.append(item);
    this.renderInvitations();
  }

  /** Accept: the join makes the user a member; then the room opens like any other. */
  accept(r, buttons, note) {
    for (const button of buttons) button.disabled = true;
    this.call("room.join", { room: r.room }, async (ack) => {
      if (!ack.ok) {
        for (const button of buttons) button.disabled = false;
        note.textContent = `Not joined: ${ack.error.message || ack.error.code}`;
        return;
      }
      this.dropInvitation(r.room);
      const room = this.room(r.room);
      room.private = r.private;
      room.with = r.with ?? null;
      await this.openRoom(r.room, { select: false });
      if (r.with) this.labelDirect(r.room, r.with.name);
      await this.openRoom(r.room, { select: true });
    });
  }

  /** Decline (`room.leave`): the entry goes, whatever the answer (a refusal means it was gone already). */
  decline(slug, buttons) {
    for (const button of buttons) button.disabled = true;
    this.call("room.leave", { room: slug }, () => this.dropInvitation(slug));
  }

  dropInvitation(slug) {
    this.invitations.get(slug)?.remove();
    this.invitations.delete(slug);
    this.renderInvitations();
  }

  renderInvitations() {
    const none = this.invitations.size === 0;
    this.ui.invitations.hidden = none;
    this.ui.invitationsTitle.hidden = none;
  }

  /** "Message" on a member: open (or find) the direct room, and show it. */
  openDirect(userId) {
    this.call("dm.open", { user: userId }, async (ack) => {
      if (!ack.ok) return;
      const room = this.room(ack.d.room);
      room.private = true;
      room.with = ack.d.with ?? null;
      await this.openRoom(ack.d.room, { select: false });
      if (room.with) this.labelDirect(ack.d.room, room.with.name);
      await this.openRoom(ack.d.room, { select: true });
    });
  }

  /** Create a private room (exactly once on the server), then join it. */
  createPrivate(slug, done) {
    this.call("room.create", { room: slug, private: true }, (ack) => {
      if (ack.ok) this.room(slug).private = true;
      done(ack);
    });
  }

  invite() {
    const text = this.ui.inviteUser.value.trim();
    if (!this.current || !text) return;
    const user = /^\d+$/.test(text) ? Number(text) : text;
    this.call("room.invite", { room: this.current, user }, (ack) => {
      // An invitation: the user joins once they accept it.
      this.ui.inviteNote.textContent = ack.ok ? "Invited." : `Not invited: ${ack.error.message || ack.error.code}`;
      if (ack.ok) {
        this.ui.inviteUser.value = "";
        this.refreshMembers(ack.d.room);
      }
    });
  }

  // Members and presence ----------------------------------------------------------

  /** A join's ack: the members (with `online`), and whether the room is private and whose. */
  joined(slug, d) {
    const room = this.room(slug);
    if (typeof d.private === "boolean") room.private = d.private;
    room.owner = d.owner ?? null;
    for (const m of d.members) room.members.set(m.user, { name: m.name, online: m.online === true });
    if (slug === this.current) this.render();
  }

  onPresence(d) {
    const member = this.rooms.get(d.room)?.members.get(d.user);
    if (!member) {
      if (this.rooms.has(d.room)) this.refreshMembers(d.room);
      return;
    }
    member.online = d.online;
    if (d.room === this.current) this.render();
  }

  /** The room now on screen (null: none). */
  show(slug) {
    if (this.typingIn && this.typingIn !== slug) this.stopped();
    this.current = slug;
    this.render();
    this.renderTyping();
    if (slug) this.refreshMembers(slug);
  }

  render() {
    const room = this.current && this.rooms.get(this.current);
    this.ui.panel.hidden = !room;
    this.ui.members.replaceChildren();
    if (!room) return;
    for (const [id, m] of room.members) {
      const item = el("li", "member");
      item.dataset.testid = "member";
      item.dataset.userId = String(id);
      item.dataset.online = String(m.online);
      const dot = el("span", "presence");
      dot.setAttribute("aria-hidden", "true");
      const name = el("span", "member-name", id === this.me ? `${m.name} (you)` : m.name);
      item.append(dot, name, el("span", "visually-hidden", m.online ? ", online" : ", offline"));
      if (id !== this.me && !room.with) {
        const button = el("button", "dm", "Message");
        button.type = "button";
        button.dataset.testid = "dm";
        button.setAttribute("aria-label", `Message ${m.name}`);
        button.addEventListener("click", () => this.openDirect(id));
        item.append(button);
      }
      this.ui.members.append(item);
    }
    // Only a private room's owner invites here (staff use the admin or the protocol).
    this.ui.inviteForm.hidden = !(room.private && room.owner === this.me && !room.with);
  }

  // Typing ---------------------------------------------------------------------

  /** A keystroke in the composer: tell the room, at most every 3 s; an empty composer stops it. */
  typed(slug, text) {
    if (!slug) return;
    if (!text.trim()) {
      this.stopped();
      return;
    }
    const now = Date.now();
    if (this.typingIn === slug && now - this.typingSentAt < TYPING_REPEAT_MS) return;
    this.typingIn = slug;
    this.typingSentAt = now;
    this.call("typing", { room: slug, typing: true }, () => {});
  }

  /** The user stopped typing (sent the message, emptied the composer, left the room). */
  stopped() {
    const slug = this.typingIn;
    if (!slug) return;
    this.typingIn = null;
    this.typingSentAt = 0;
    this.call("typing", { room: slug, typing: false }, () => {});
  }

  onTyping(d) {
    if (d.user === this.me) return;
    const room = this.room(d.room);
    clearTimeout(room.typists.get(d.user)?.timer);
    if (d.typing) {
      // Lapses here too, should the server's `false` be lost with a connection.
      const timer = setTimeout(() => this.onTyping({ ...d, typing: false }), TYPING_LAPSE_MS);
      room.typists.set(d.user, { name: d.name, timer });
    } else room.typists.delete(d.user);
    if (d.room === this.current) this.renderTyping();
  }

  /** A message from `senderId` ends their typing in the room, whichever process stored it. */
  posted(slug, senderId) {
    const room = this.rooms.get(slug);
    if (room?.typists.has(senderId)) this.onTyping({ room: slug, user: senderId, typing: false });
    if (room && !room.members.has(senderId)) this.refreshMembers(slug);
  }

  renderTyping() {
    const names = [...(this.rooms.get(this.current)?.typists.values() ?? [])].map((t) => t.name);
    this.ui.typing.hidden = names.length === 0;
    if (names.length === 0) this.ui.typing.textContent = "";
    else if (names.length === 1) this.ui.typing.textContent = `${names[0]} is typing...`;
    else if (names.length === 2) this.ui.typing.textContent = `${names[0]} and ${names[1]} are typing...`;
    else this.ui.typing.textContent = `${names.length} people are typing...`;
  }
}
