// A message's place in threads (PROTOCOL 1.2 "Page hooks"): on a stored
// message that is not a reply, `[data-testid=reply]` (opens its thread) and
// `[data-testid=reply-count]` (its replies, hidden at 0).
import { button } from "./dom.js";

export class RepliesView {
  /** `open()`: the user wants the message's thread. */
  constructor({ open }) {
    this.button = button("reply", "Reply", "reply");
    this.button.hidden = true;
    this.count = button("reply-count", "", "reply-count");
    this.count.hidden = true;
    for (const node of [this.button, this.count]) {
      node.addEventListener("click", (event) => {
        event.stopPropagation();
        open();
      });
    }
  }

  /** `message`: model/message.js; a deleted root keeps its count, without a Reply button. */
  draw(message) {
    const root = message.stored && message.replyTo === null;
    this.button.hidden = !root || message.deleted;
    this.count.hidden = !root || message.replies === 0;
    this.count.textContent = String(message.replies);
    this.count.setAttribute("aria-label", `${message.replies} ${message.replies === 1 ? "reply" : "replies"}`);
    this.count.title = this.count.getAttribute("aria-label");
  }
}
