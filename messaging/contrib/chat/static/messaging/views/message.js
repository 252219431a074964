// One message on screen (`li.msg`), drawn from its model (model/message.js)
// and what the outbox still holds of it; `draw` may be called any time and
// changes only what differs. The user's clicks go to `actions`.
//
// Its hooks (README "The chat page"): `data-msg-id`, `data-state`,
// `data-seq` once stored, `data-version`, `data-deleted`, and inside
// `[data-testid=react]`, `[data-testid=edit]`, `[data-testid=delete]`,
// `[data-testid=edited]`, and its files (`[data-testid=attachment]`,
// views/files.js) under the body; its emoji reactions (views/emoji.js)
// under them, its emoji picker and its thread's reply button and count
// (views/replies.js) in the foot. User text only ever goes through textContent.
import { el, shownName } from "./dom.js";
import { editControls, editedMark, editor } from "./edits.js";
import { EmojiView } from "./emoji.js";
import { FilesView } from "./files.js";
import { icon, STATE_LABEL } from "./icons.js";
import { ReactionsView } from "./reactions.js";
import { RepliesView } from "./replies.js";

const TIME = { hour: "2-digit", minute: "2-digit" };

export class MessageView {
  /**
   * `actions`: `react(message)`, `toggle(message, emoji)`, `reply(message)`,
   * `edit(message, body)`, `remove(message)`, `retry(message)`,
   * `discard(message)`; `picker`: the emoji the picker offers.
   */
  constructor(message, actions) {
    this.actions = actions;
    this.message = message;
    this.context = null;
    this.node = el("li", message.own ? "msg own" : "msg");
    this.node.dataset.msgId = message.id;
    const meta = el("div", "meta");
    meta.append(el("span", "sender", message.own ? "You" : shownName(message.senderName, message.senderNode)));
    this.time = el("time");
    meta.append(this.time);
    this.body = el("p", "body", message.body);
    this.files = new FilesView();
    this.foot = el("div", "foot");
    this.reactions = new ReactionsView({ react: () => actions.react(this.message) });
    this.emoji = new EmojiView({ toggle: (emoji) => actions.toggle(this.message, emoji), offered: actions.picker });
    this.replies = new RepliesView({ open: () => actions.reply(this.message) });
    this.stateButton = el("button", "state");
    this.stateButton.type = "button";
    this.stateButton.setAttribute("aria-expanded", "false");
    this.foot.append(this.reactions.button, this.emoji.picker, this.replies.button, this.replies.count, this.stateButton);
    this.readersLine = el("p", "readers");
    this.readersLine.hidden = true;
    this.node.append(meta, this.body, this.files.node, this.emoji.list, this.foot, this.readersLine);
    Object.assign(this, { editedMark: null, controls: null, editor: null, changeError: null, failure: null });
    // The whole message toggles "who has read it" for the mouse; the state
    // button is the keyboard's way to it.
    this.node.addEventListener("click", (event) => {
      if (!event.target.closest(".actions")) this.toggleReaders();
    });
    this.stateButton.addEventListener("click", (event) => {
      event.stopPropagation();
      this.toggleReaders();
    });
  }

  /**
   * Draw `message`. `context`: `changes` (its edits and deletes still in the
   * outbox, oldest first), `reactions` ({count, waiting}), `emoji` (model/emoji.js
   * `of`), `emojiPending` (a Set of emoji), `files` (what it
   * shows: model/files.js `filesOf`) and `readers()` (model/room.js `readersOf`).
   */
  draw(message, context) {
    Object.assign(this, { message, context });
    if (message.seq !== null) this.node.dataset.seq = String(message.seq);
    if (message.at && this.time.dateTime !== message.at) {
      this.time.dateTime = message.at;
      this.time.textContent = new Date(message.at).toLocaleTimeString([], TIME);
    }
    if (message.version > 0) this.node.dataset.version = String(message.version);
    this.drawState();
    if (message.deleted) this.drawTombstone();
    else {
      this.drawBody();
      this.files.draw(context.files ?? []);
      this.drawEdits();
      if (message.stored) {
        this.reactions.draw({ ...context.reactions, error: message.reactionError });
        this.emoji.draw(context.emoji ?? [], context.emojiPending);
      }
    }
    this.replies.draw(message);
    this.drawChangeError();
  }

  drawState() {
    const { state } = this.message;
    if (this.node.dataset.state !== state) {
      this.node.dataset.state = state;
      // A label, not text: the message's text stays sender, time and body.
      this.stateButton.replaceChildren(icon(state));
      this.stateButton.setAttribute("aria-label", `${STATE_LABEL[state]}. Who has read it?`);
      this.stateButton.title = STATE_LABEL[state];
    }
    this.drawFailure();
    this.drawReaders();
  }

  /** A refused own message: the reason, Retry and Discard. */
  drawFailure() {
    const error = this.message.state === "failed" ? this.message.error : null;
    if (error === this.failure) return;
    this.failure = error;
    this.node.querySelector(".actions")?.remove();
    if (!error) return;
    const actions = el("div", "actions");
    actions.append(el("span", "error", `Not sent: ${error.message || error.code}`));
    const retry = el("button", "retry", "Retry");
    const discard = el("button", "discard", "Discard");
    retry.type = discard.type = "button";
    retry.addEventListener("click", () => this.actions.retry(this.message));
    discard.addEventListener("click", () => this.actions.discard(this.message));
    actions.append(retry, discard);
    this.node.append(actions);
  }

  /** The body as stored, or as the user's pending edit has it; the "(edited)" mark. */
  drawBody() {
    const changes = this.context.changes;
    const edit = changes.findLast((entry) => entry.t === "message.edit");
    if (!this.editor) this.body.textContent = edit ? edit.d.body : this.message.body;
    if (this.message.edited && !this.editedMark) {
      this.editedMark = editedMark();
      this.time.after(this.editedMark);
    }
  }

  /** An own stored message's controls; a change of it waiting in the outbox is marked. */
  drawEdits() {
    const { message, context } = this;
    if (message.own && message.stored && !this.controls) {
      this.controls = editControls({
        edit: () => this.openEditor(),
        remove: () => this.actions.remove(message),
      });
      this.foot.prepend(this.controls);
    }
    const last = context.changes.at(-1);
    if (last) this.node.dataset.changePending = last.t === "message.delete" ? "delete" : "edit";
    else delete this.node.dataset.changePending;
  }

  /** Why the last edit or delete was refused, until the next one is applied. */
  drawChangeError() {
    const error = this.message.changeError;
    if (this.changeError?.error === error) return;
    this.changeError?.node.remove();
    this.changeError = null;
    if (!error) return;
    this.changeError = { error, node: el("p", "error change-error", `Not changed: ${error.message || error.code}`) };
    this.node.append(this.changeError.node);
  }

  drawTombstone() {
    if (this.node.dataset.deleted === "true") return;
    this.node.dataset.deleted = "true";
    this.closeEditor();
    this.body.textContent = "message deleted";
    this.body.classList.add("tombstone");
    this.files.draw([]);
    this.editedMark?.remove();
    this.editedMark = null;
    this.controls?.remove();
    this.controls = null;
    this.reactions.button.remove();
    this.emoji.remove();
    delete this.node.dataset.changePending;
  }

  openEditor() {
    if (this.editor || this.message.deleted) return;
    this.editor = editor(this.body.textContent, {
      save: (body) => this.actions.edit(this.message, body),
      close: () => this.closeEditor(),
    });
    this.body.hidden = true;
    this.body.after(this.editor.form);
    this.editor.focus();
  }

  closeEditor() {
    if (!this.editor) return;
    this.editor.form.remove();
    this.editor = null;
    this.body.hidden = false;
    // What came while the editor was open shows now.
    if (!this.message.deleted) this.drawBody();
  }

  toggleReaders() {
    const open = this.readersLine.hidden;
    this.readersLine.hidden = !open;
    this.stateButton.setAttribute("aria-expanded", String(open));
    this.drawReaders();
  }

  drawReaders() {
    if (this.readersLine.hidden) return;
    this.readersLine.textContent = readersText(this.message, this.context?.readers);
  }
}

/** Who has read `message`, as its readers line says it; `readers()` gives `{partial, total, names}`. */
function readersText(message, readers) {
  if (message.seq === null || !readers) return message.state === "failed" ? "Not sent." : "Not sent yet.";
  const { partial, total, names } = readers();
  if (partial) {
    // Too many members to know each one's watermarks: only what the server
    // said of an own message's state, and nothing of others' messages.
    if (!message.own) return `Who has read it is not shown in a room of ${total} members.`;
    return message.state === "read" ? "Read by everyone." : "Not read by everyone yet.";
  }
  return names.length ? `Read by ${names.join(", ")}` : "Not read by anyone yet.";
}
