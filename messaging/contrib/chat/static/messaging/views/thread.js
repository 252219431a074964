// The thread panel (PROTOCOL 1.2 "Page hooks"): `[data-testid=thread]`
// (`data-root`: the root's seq) beside the room, its root quoted, its
// replies as messages drawn as the room's are (views/message.js: each with
// `data-msg-id` and `data-state`), and its own composer
// (`[data-testid=thread-composer]`, `[data-testid=thread-send]`), whose
// replies go through the same outbox as every post.
import { button, el, shownName } from "./dom.js";
import { MessageView } from "./message.js";

export class ThreadPanel {
  /** `parent`: where the panel goes; `actions`: a reply's buttons (views/message.js); `send(body)`, `close()`. */
  constructor({ parent, actions, send, close }) {
    Object.assign(this, { actions, key: null });
    this.node = el("aside", "thread");
    this.node.dataset.testid = "thread";
    this.node.hidden = true;
    this.node.setAttribute("aria-label", "Thread");
    const head = el("div", "thread-head");
    const shut = button("thread-close", "Close", "thread-close");
    shut.addEventListener("click", () => close());
    head.append(el("h3", "thread-title", "Thread"), shut);
    this.root = el("blockquote", "thread-root");
    this.list = el("ol", "message-list thread-list");
    this.list.setAttribute("aria-label", "Replies");
    this.form = el("form", "thread-form");
    this.input = el("textarea", "thread-composer");
    this.input.dataset.testid = "thread-composer";
    this.input.rows = 1;
    this.input.maxLength = 4000;
    this.input.placeholder = "Reply…";
    this.input.setAttribute("aria-label", "Reply");
    const sendButton = button("thread-send", "Send", "thread-send");
    sendButton.type = "submit";
    this.form.append(this.input, sendButton);
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      const body = this.input.value.trim();
      if (!body) return;
      send(body);
      this.input.value = "";
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        this.form.requestSubmit();
      }
    });
    this.node.append(head, this.root, this.list, this.form);
    parent.append(this.node);
    this.views = new Map(); // Message -> MessageView
  }

  /** Open the thread of `root` (a model/message.js Message) of `slug`; what another thread showed goes. */
  open(slug, root) {
    const key = `${slug}#${root.seq}`;
    if (this.key !== key) {
      this.list.replaceChildren();
      this.views.clear();
    }
    this.key = key;
    this.node.dataset.root = String(root.seq);
    this.node.hidden = false;
    this.drawRoot(root);
    this.input.focus();
  }

  close() {
    this.key = null;
    this.node.hidden = true;
    delete this.node.dataset.root;
  }

  /** Whether the panel shows the thread of root `seq` of `slug`. */
  shows(slug, seq) {
    return this.key === `${slug}#${seq}`;
  }

  drawRoot(root) {
    const who = root.own ? "You" : shownName(root.senderName, root.senderNode);
    this.root.replaceChildren(el("span", "sender", who), el("p", "body", root.deleted ? "message deleted" : root.body));
  }

  /** Draw `reply` (made if new) in its place, as views/message.js draws it with `context`. */
  draw(reply, context) {
    let view = this.views.get(reply);
    if (!view) {
      view = new MessageView(reply, this.actions);
      this.views.set(reply, view);
    }
    view.draw(reply, context);
    const seq = reply.seq;
    const before =
      seq === null ? null : [...this.list.children].find((node) => node !== view.node && Number(node.dataset.seq ?? Infinity) > seq);
    if (view.node.parentNode !== this.list || view.node.nextSibling !== (before ?? null)) {
      this.list.insertBefore(view.node, before ?? null);
    }
  }

  remove(reply) {
    this.views.get(reply)?.node.remove();
    this.views.delete(reply);
  }
}
