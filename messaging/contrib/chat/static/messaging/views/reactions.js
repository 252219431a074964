// A stored message's reactions: the "+1" button with the server's count.
//
// Per-emoji reactions (PROTOCOL.md "Page hooks (1.2)": a picker of emoji
// and a `[data-testid=reaction]` per emoji with a count) replace this view,
// drawn from the same place in views/message.js.
import { button, el } from "./dom.js";

export class ReactionsView {
  /** `react()`: the user clicked "+1". */
  constructor({ react }) {
    this.button = button("react", "+1", "react");
    this.button.hidden = true; // shown once the message has a seq to react to
    this.count = el("span", "count");
    this.count.dataset.testid = "reaction-count";
    this.button.append(this.count);
    this.button.addEventListener("click", (event) => {
      event.stopPropagation();
      react();
    });
  }

  /** `count`: the server's; `waiting`: this page's clicks on their way; `error`: why the last one was refused. */
  draw({ count, waiting, error }) {
    this.count.textContent = String(count);
    this.count.hidden = count === 0;
    this.button.toggleAttribute("data-pending", waiting > 0);
    this.button.toggleAttribute("data-failed", error !== null);
    let label = `+1 reaction, ${count || "none"} so far`;
    if (waiting) label += `, ${waiting} of yours on the way`;
    if (error) label += `; your last one was not counted: ${error}`;
    this.button.setAttribute("aria-label", label);
    this.button.title = label;
    this.button.hidden = false;
  }
}
