// A stored message's emoji reactions (PROTOCOL 1.2 "Page hooks"): the
// picker (`[data-testid=react-picker]`, a disclosure of `[data-testid=emoji]`
// buttons, each `data-emoji`) and, under the message, one
// `[data-testid=reaction]` per emoji with a count (`data-emoji`, `data-mine`,
// the count as its text). A click on either toggles the user's own.
import { button, el } from "./dom.js";

export class EmojiView {
  /** `toggle(emoji)`: the user clicked an emoji; `offered`: the picker's emoji (model/emoji.js PICKER). */
  constructor({ toggle, offered }) {
    this.toggle = toggle;
    this.picker = el("details", "react-picker");
    this.picker.dataset.testid = "react-picker";
    this.picker.hidden = true; // shown once the message is stored
    const summary = el("summary", "react-open", "☺");
    summary.setAttribute("aria-label", "React with an emoji");
    summary.title = "React with an emoji";
    const menu = el("div", "emoji-menu");
    for (const emoji of offered) {
      const choice = button("emoji", emoji, "emoji");
      choice.dataset.emoji = emoji;
      choice.setAttribute("aria-label", `React with ${emoji}`);
      choice.addEventListener("click", (event) => {
        event.stopPropagation();
        this.picker.open = false;
        toggle(emoji);
      });
      menu.append(choice);
    }
    this.picker.append(summary, menu);
    this.picker.addEventListener("click", (event) => event.stopPropagation());
    this.list = el("ul", "reactions");
    this.list.hidden = true;
    this.shown = new Map(); // emoji -> its button
  }

  /** `reactions`: `[{emoji, count, mine}]` (model/emoji.js `of`); `pending`: emoji with a toggle on its way. */
  draw(reactions, pending = new Set()) {
    this.picker.hidden = false;
    const wanted = new Set(reactions.map((reaction) => reaction.emoji));
    for (const [emoji, node] of this.shown) {
      if (!wanted.has(emoji)) {
        node.parentNode.remove();
        this.shown.delete(emoji);
      }
    }
    for (const { emoji, count, mine } of reactions) {
      let node = this.shown.get(emoji);
      if (!node) {
        node = button("reaction", "", "reaction");
        node.dataset.emoji = emoji;
        node.addEventListener("click", (event) => {
          event.stopPropagation();
          this.toggle(emoji);
        });
        const item = el("li");
        item.append(node);
        this.list.append(item);
        this.shown.set(emoji, node);
      }
      node.dataset.mine = String(mine);
      node.textContent = String(count); // the emoji itself is drawn from `data-emoji` (chat.css)
      node.setAttribute("aria-pressed", String(mine));
      node.setAttribute("aria-label", `${emoji} ${count}${mine ? ", yours" : ""}`);
      node.toggleAttribute("data-pending", pending.has(emoji));
    }
    this.list.hidden = reactions.length === 0;
  }

  /** A deleted message shows no reactions and takes none. */
  remove() {
    this.picker.remove();
    this.list.remove();
  }
}
