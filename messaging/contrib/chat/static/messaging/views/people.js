// The members panel beside the conversation (`[data-testid=members]`: a
// `[data-testid=member]` per member with `data-user-id`, `data-online` and,
// on others in a room that is not direct, a `[data-testid=dm]` "Message"
// button), the typing line under the messages (`[data-testid=typing]`) and
// a private room's invite control (`[data-testid=invite-form]`).
// User text only ever goes through textContent.
import { button, el, local, shownName } from "./dom.js";

export class PeopleView {
  /** `message(userId)`: "Message" on a member; `invite(text)`: the invite form sent. */
  constructor({ me, message, invite }) {
    Object.assign(this, { me, message });
    const $ = (selector) => document.querySelector(selector);
    this.ui = {
      members: $("[data-testid=members]"),
      panel: $(".people"),
      typing: $("[data-testid=typing]"),
      inviteForm: $("[data-testid=invite-form]"),
      inviteUser: $("[data-testid=invite-user]"),
      inviteNote: $("[data-testid=invite-note]"),
    };
    this.ui.inviteForm.addEventListener("submit", (event) => {
      event.preventDefault();
      invite(this.ui.inviteUser.value.trim());
    });
  }

  /** The panel of `room` (model/people.js RoomPeople; null: none); `invites`: this user may invite. */
  draw(room, { invites }) {
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
      const name = el("span", "member-name", id === this.me ? `${m.name} (you)` : shownName(m.name, m.node));
      item.append(dot, name, el("span", "visually-hidden", m.online ? ", online" : ", offline"));
      if (id !== this.me && !room.with && local(m.node)) {
        const dm = button("dm", "Message", "dm");
        dm.setAttribute("aria-label", `Message ${m.name}`);
        dm.addEventListener("click", () => this.message(id));
        item.append(dm);
      }
      this.ui.members.append(item);
    }
    this.ui.inviteForm.hidden = !invites;
  }

  /** "ana is typing..." for `names`, hidden when nobody is. */
  typing(names) {
    this.ui.typing.hidden = names.length === 0;
    if (names.length === 0) this.ui.typing.textContent = "";
    else if (names.length === 1) this.ui.typing.textContent = `${names[0]} is typing...`;
    else if (names.length === 2) this.ui.typing.textContent = `${names[0]} and ${names[1]} are typing...`;
    else this.ui.typing.textContent = `${names.length} people are typing...`;
  }

  /** The answer to an invite: `ok`, or the refusal's reason. */
  invited(ok, reason) {
    this.ui.inviteNote.textContent = ok ? "Invited." : `Not invited: ${reason}`;
    if (ok) this.ui.inviteUser.value = "";
  }
}
