// Edits and deletes on the page: a message's controls, its edited mark and
// its tombstone. The commands go through the outbox (chat.js); this module
// only shows them. User text only ever goes through textContent.
import { newer } from "./changes.js";

export const EDIT = "message.edit";
export const DELETE = "message.delete";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/**
 * Show the stored state a frame tells (`msg`, `msg.edit`, `msg.delete`) if
 * its version is higher than the one shown: a client never lets an older
 * change overwrite a newer one. Returns whether it did.
 */
export function showVersion(bubble, d, { deleted = d.deleted === true } = {}) {
  if (!newer(d.version, bubble.version)) return false;
  bubble.version = d.version;
  bubble.node.dataset.version = String(d.version);
  if (deleted) {
    showTombstone(bubble);
    return true;
  }
  if (typeof d.body === "string") bubble.storedBody = d.body;
  if (!bubble.editing) bubble.body.textContent = bubble.storedBody;
  if ((d.edited_at || d.version > 1) && !bubble.editedMark) {
    bubble.editedMark = editedMark();
    bubble.time.after(bubble.editedMark);
  }
  return true;
}

function showTombstone(bubble) {
  bubble.deleted = true;
  bubble.node.dataset.deleted = "true";
  bubble.storedBody = "";
  closeEditor(bubble);
  bubble.body.textContent = "message deleted";
  bubble.body.classList.add("tombstone");
  bubble.editedMark?.remove();
  bubble.editedMark = null;
  bubble.controls?.remove();
  bubble.controls = null;
  bubble.reactButton.remove();
  delete bubble.node.dataset.changePending;
}

/** An own edit or delete waiting in the outbox: shown at once, marked pending until its ack. */
export function showPending(bubble, entry) {
  if (bubble.deleted) return;
  bubble.node.dataset.changePending = entry.t === DELETE ? "delete" : "edit";
  if (entry.t === EDIT && !bubble.editing) bubble.body.textContent = entry.d.body;
}

/** The pending change left the outbox: ok (the frame or ack version shows it) or refused. */
export function settle(bubble, error) {
  delete bubble.node.dataset.changePending;
  if (!bubble.deleted && !bubble.editing) bubble.body.textContent = bubble.storedBody;
  bubble.changeError?.remove();
  bubble.changeError = null;
  if (error) {
    bubble.changeError = el("p", "error change-error", `Not changed: ${error.message || error.code}`);
    bubble.node.append(bubble.changeError);
  }
}

/** Edit and Delete on one of the user's own stored messages. */
export function addControls(bubble, { edit, remove }) {
  if (bubble.controls || bubble.deleted || !bubble.own) return;
  const controls = el("span", "controls");
  const editButton = el("button", "edit", "Edit");
  editButton.type = "button";
  editButton.dataset.testid = "edit";
  const deleteButton = el("button", "delete", "Delete");
  deleteButton.type = "button";
  deleteButton.dataset.testid = "delete";
  editButton.addEventListener("click", (event) => {
    event.stopPropagation();
    openEditor(bubble, edit);
  });
  deleteButton.addEventListener("click", (event) => {
    event.stopPropagation();
    if (window.confirm("Delete this message for everyone?")) remove();
  });
  controls.append(editButton, deleteButton);
  bubble.controls = controls;
  bubble.foot.prepend(controls);
}

function openEditor(bubble, edit) {
  if (bubble.editing || bubble.deleted) return;
  bubble.editing = true;
  const form = el("form", "editor");
  const input = el("textarea", "edit-input");
  input.dataset.testid = "edit-input";
  input.maxLength = 4000;
  input.rows = 2;
  input.value = bubble.body.textContent;
  input.setAttribute("aria-label", "Edit the message");
  const save = el("button", "edit-save", "Save");
  save.type = "submit";
  save.dataset.testid = "edit-save";
  const cancel = el("button", "edit-cancel", "Cancel");
  cancel.type = "button";
  form.append(input, save, cancel);
  form.addEventListener("click", (event) => event.stopPropagation());
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = input.value.trim();
    closeEditor(bubble);
    if (body && body !== bubble.body.textContent) edit(body);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      closeEditor(bubble);
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  cancel.addEventListener("click", () => closeEditor(bubble));
  bubble.editor = form;
  bubble.body.hidden = true;
  bubble.body.after(form);
  input.focus();
}

function closeEditor(bubble) {
  if (!bubble.editing) return;
  bubble.editing = false;
  bubble.editor.remove();
  bubble.editor = null;
  bubble.body.hidden = false;
}

/** The "(edited)" mark, there only once the message is edited. */
function editedMark() {
  const mark = el("span", "edited", "(edited)");
  mark.dataset.testid = "edited";
  return mark;
}
