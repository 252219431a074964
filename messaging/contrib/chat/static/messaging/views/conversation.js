// The conversation: each room's list of messages (one `ol` per room, the
// room on screen shown), messages placed in seq order, the "New messages"
// divider, and the scrolling that goes with them.
//
// A thread panel is a second, smaller conversation beside this one: a list
// of MessageViews of the replies, drawn the same way.
import { el } from "./dom.js";
import { MessageView } from "./message.js";

// How close to the end (px) counts as reading the newest messages.
const NEAR_END = 80;

export class Conversation {
  /**
   * `container`: `[data-testid=messages]`; `title` and `empty`: the room's
   * heading and what shows when there is no room; `actions`: what a
   * message's buttons do (views/message.js); `placed(node)`: a stored
   * message's node went in (read tracking watches it).
   */
  constructor({ container, title, empty, actions, placed }) {
    Object.assign(this, { container, title, empty, actions, placed });
    this.rooms = new Map(); // slug -> {list, views: Map(Message -> MessageView)}
  }

  /** The room's heading; null: no room on screen. */
  heading(text) {
    this.title.textContent = text ?? "No room yet";
    this.empty.hidden = text !== null;
  }

  add(slug) {
    if (this.rooms.has(slug)) return;
    const list = el("ol", "message-list");
    list.setAttribute("aria-label", `Messages in ${slug}`);
    list.hidden = true;
    this.container.append(list);
    this.rooms.set(slug, { list, views: new Map() });
  }

  drop(slug) {
    this.rooms.get(slug)?.list.remove();
    this.rooms.delete(slug);
  }

  /** The list of `slug`, or null. */
  list(slug) {
    return this.rooms.get(slug)?.list ?? null;
  }

  /** Show the room `slug` (null: none). */
  show(slug) {
    for (const [each, { list }] of this.rooms) list.hidden = each !== slug;
  }

  /** Draw `message` of `slug` (made if new) and put it in its place. */
  draw(slug, message, context) {
    const room = this.rooms.get(slug);
    if (!room) return null;
    let view = room.views.get(message);
    if (!view) {
      view = new MessageView(message, this.actions);
      room.views.set(message, view);
    }
    view.draw(message, context);
    this.place(room.list, view.node, message.seq);
    return view;
  }

  /** Members' watermarks moved: the open "who has read it" lines of `slug` say it. */
  drawReaders(slug) {
    for (const view of this.rooms.get(slug)?.views.values() ?? []) view.drawReaders();
  }

  /** A message gone from the room (a failed one retried or discarded). */
  remove(slug, message) {
    const room = this.rooms.get(slug);
    room?.views.get(message)?.node.remove();
    room?.views.delete(message);
  }

  /** In seq order; messages not yet stored stay last, in the order they were written. */
  place(list, node, seq) {
    if (seq === null) {
      if (node.parentNode !== list) list.append(node);
      return;
    }
    let before = null;
    for (const other of list.children) {
      const otherSeq = other.dataset.seq ? Number(other.dataset.seq) : Infinity;
      if (other !== node && otherSeq > seq) {
        before = other;
        break;
      }
    }
    if (node.nextSibling !== before || node.parentNode !== list) list.insertBefore(node, before);
    this.placed(node);
  }

  /** The divider above message `seq` of `slug` and those after it; none when `seq` is null or not shown. */
  divider(slug, seq) {
    const list = this.list(slug);
    if (!list) return;
    list.querySelector("[data-testid=first-unread]")?.remove();
    if (seq === null) return;
    const before = [...list.children].find((node) => node.dataset.seq && Number(node.dataset.seq) >= seq);
    if (!before) return;
    const divider = el("li", "first-unread", "New messages");
    divider.dataset.testid = "first-unread";
    divider.setAttribute("role", "separator");
    list.insertBefore(divider, before);
  }

  /** Bring `message` of `slug` into view and mark it found (a search result opened); whether it is shown. */
  reveal(slug, message) {
    const node = this.rooms.get(slug)?.views.get(message)?.node;
    if (!node) return false;
    for (const other of this.container.querySelectorAll(".msg.found")) other.classList.remove("found");
    node.classList.add("found");
    node.scrollIntoView({ block: "center" });
    return true;
  }

  nearEnd() {
    const box = this.container;
    return box.scrollHeight - box.scrollTop - box.clientHeight < NEAR_END;
  }

  scrollToEnd() {
    this.container.scrollTop = this.container.scrollHeight;
  }
}
