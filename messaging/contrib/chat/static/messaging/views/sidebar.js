// The sidebar's rooms: a `[data-testid=room-item]` per room (`data-room`),
// whose button opens it and holds its unread badge (`[data-testid=unread]`,
// hidden at zero); direct rooms are listed apart (`[data-testid=dm-list]`)
// under the other person's name.
import { el } from "./dom.js";

export class Sidebar {
  /** `open(slug)`: the user clicked a room. */
  constructor({ roomList, dmList, open }) {
    Object.assign(this, { roomList, dmList, open });
    this.items = new Map(); // slug -> {item, button, name, badge}
  }

  add(slug) {
    if (this.items.has(slug)) return;
    const item = el("li");
    item.dataset.testid = "room-item";
    item.dataset.room = slug;
    const button = el("button", "room-button");
    button.type = "button";
    const name = el("span", "room-name", `# ${slug}`);
    const badge = el("span", "unread");
    badge.dataset.testid = "unread";
    badge.hidden = true;
    button.append(name, badge);
    button.addEventListener("click", () => this.open(slug));
    item.append(button);
    this.roomList.append(item);
    this.items.set(slug, { item, button, name, badge });
  }

  /** A direct room: listed apart, under the other person's name. */
  direct(slug, name) {
    const entry = this.items.get(slug);
    if (!entry) return;
    entry.name.textContent = name;
    if (entry.item.parentNode !== this.dmList) this.dmList.append(entry.item);
  }

  drop(slug) {
    this.items.get(slug)?.item.remove();
    this.items.delete(slug);
  }

  /** The room on screen (null: none) is marked current. */
  select(slug) {
    for (const [each, { button }] of this.items) {
      if (each === slug) button.setAttribute("aria-current", "true");
      else button.removeAttribute("aria-current");
    }
  }

  unread(slug, count) {
    const badge = this.items.get(slug)?.badge;
    if (!badge) return;
    badge.textContent = String(count);
    badge.hidden = count === 0;
    badge.setAttribute("aria-label", `${count} unread`);
  }
}
