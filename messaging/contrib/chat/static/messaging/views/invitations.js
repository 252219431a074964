// The sidebar's invitations (PROTOCOL.md "Page hooks (1.2)"):
// `[data-testid=invitations]` (hidden when empty) holding a
// `[data-testid=invitation]` per room (`data-room`) that says who asks and to
// what, with `[data-testid=accept]` and `[data-testid=decline]`.
// User text only ever goes through textContent.
import { invitationText } from "../model/invitations.js";
import { button, el } from "./dom.js";

export class InvitationsView {
  /** `accept(slug)`, `decline(slug)`: the user's answers. */
  constructor({ list, title, accept, decline }) {
    Object.assign(this, { list, title, accept, decline });
    this.items = new Map(); // slug -> {item, buttons, note}
  }

  /** Draw `invitations` (model/invitations.js): one entry each, in the order they came. */
  draw(invitations) {
    for (const [slug, { item }] of this.items) {
      if (!invitations.get(slug)) {
        item.remove();
        this.items.delete(slug);
      }
    }
    for (const [slug, invitation] of invitations.entries) {
      if (!this.items.has(slug)) this.items.set(slug, this.entry(invitation.entry));
      const { buttons, note } = this.items.get(slug);
      for (const each of buttons) each.disabled = invitation.answering;
      note.textContent = invitation.note;
    }
    const none = this.items.size === 0;
    this.list.hidden = none;
    this.title.hidden = none;
  }

  entry(r) {
    const item = el("li", "invitation");
    item.dataset.testid = "invitation";
    item.dataset.room = r.room;
    const text = invitationText(r);
    const accept = button("accept", "Accept", "accept");
    const decline = button("decline", "Decline", "decline");
    accept.setAttribute("aria-label", `Accept: ${text}`);
    decline.setAttribute("aria-label", `Decline: ${text}`);
    accept.addEventListener("click", () => this.accept(r.room));
    decline.addEventListener("click", () => this.decline(r.room));
    const note = el("p", "hint");
    note.setAttribute("role", "status");
    const row = el("div", "row");
    row.append(accept, decline);
    item.append(el("p", "invitation-text", text), row, note);
    this.list.append(item);
    return { item, buttons: [accept, decline], note };
  }
}
