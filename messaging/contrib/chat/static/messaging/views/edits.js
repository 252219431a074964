// A message's Edit and Delete controls and its editor. The commands go
// through the outbox (controller/messages.js); this module only shows them.
// User text only ever goes through textContent.
import { button, el } from "./dom.js";

/** Edit and Delete on one of the user's own stored messages; `edit()` opens the editor, `remove()` sends the delete. */
export function editControls({ edit, remove }) {
  const controls = el("span", "controls");
  const editButton = button("edit", "Edit", "edit");
  const deleteButton = button("delete", "Delete", "delete");
  editButton.addEventListener("click", (event) => {
    event.stopPropagation();
    edit();
  });
  deleteButton.addEventListener("click", (event) => {
    event.stopPropagation();
    if (window.confirm("Delete this message for everyone?")) remove();
  });
  controls.append(editButton, deleteButton);
  return controls;
}

/**
 * The editor, in place of the body `text` shows: Enter or Save calls
 * `save(body)` with a changed, non-empty body; Escape or Cancel closes it.
 * `close()` is called either way, before `save`.
 */
export function editor(text, { save, close }) {
  const form = el("form", "editor");
  const input = el("textarea", "edit-input");
  input.dataset.testid = "edit-input";
  input.maxLength = 4000;
  input.rows = 2;
  input.value = text;
  input.setAttribute("aria-label", "Edit the message");
  const saveButton = el("button", "edit-save", "Save");
  saveButton.type = "submit";
  saveButton.dataset.testid = "edit-save";
  const cancel = button("edit-cancel", "Cancel");
  form.append(input, saveButton, cancel);
  form.addEventListener("click", (event) => event.stopPropagation());
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = input.value.trim();
    close();
    if (body && body !== text) save(body);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      close();
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  cancel.addEventListener("click", () => close());
  return { form, focus: () => input.focus() };
}

/** The "(edited)" mark, there only once the message is edited. */
export function editedMark() {
  const mark = el("span", "edited", "(edited)");
  mark.dataset.testid = "edited";
  return mark;
}
