// The composer (`[data-testid=composer]`, `[data-testid=send]`: Enter sends,
// Shift+Enter starts a new line) and the room form (`[data-testid=room-form]`,
// `[data-testid=room-input]`, `[data-testid=room-private]`).
//
// The composer's file input and a search box (PROTOCOL.md "Page hooks
// (1.2)") are views of their own beside this one.
// A room of this deployment, or `slug@node` of another (PROTOCOL 1.2).
const ROOM_SLUG = /^[a-z0-9][a-z0-9-]{0,63}(@[a-z][a-z0-9]{0,15})?$/;
// The composer grows with its text up to this height (px).
const COMPOSER_MAX = 160;

export class Composer {
  /** `send(body)`: a message written; `typed(text)`: a keystroke. */
  constructor({ send, typed }) {
    this.form = document.querySelector("[data-testid=composer-form]");
    this.input = document.querySelector("[data-testid=composer]");
    this.button = document.querySelector("[data-testid=send]");
    const submit = () => {
      const body = this.input.value.trim();
      if (!body || this.input.disabled) return;
      this.input.value = "";
      this.fit();
      send(body);
    };
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      submit();
      this.focus();
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        submit();
      }
    });
    this.input.addEventListener("input", () => {
      this.fit();
      typed(this.input.value);
    });
  }

  /** Whether there is a room to write to. */
  enable(on) {
    this.input.disabled = !on;
    this.button.disabled = !on;
  }

  focus() {
    this.input.focus();
  }

  fit() {
    this.input.style.height = "auto";
    this.input.style.height = `${Math.min(this.input.scrollHeight, COMPOSER_MAX)}px`;
  }
}

export class RoomForm {
  /** `join(slug, {private})`: a valid room name was sent. */
  constructor({ join }) {
    this.form = document.querySelector("[data-testid=room-form]");
    this.input = document.querySelector("[data-testid=room-input]");
    this.hint = document.querySelector("#room-hint");
    this.private = document.querySelector("[data-testid=room-private]");
    this.hintText = this.hint.textContent;
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      const slug = this.input.value.trim().toLowerCase();
      if (!ROOM_SLUG.test(slug)) {
        this.invalid(null);
        return;
      }
      this.input.removeAttribute("aria-invalid");
      this.hint.textContent = this.hintText;
      this.hint.classList.remove("invalid");
      this.input.value = "";
      join(slug, { private: this.private.checked });
    });
  }

  /** The private room was created: the next one is public unless asked again. */
  created() {
    this.private.checked = false;
  }

  /** The name is refused: `reason` says why (null: the hint already does); the name stays to fix. */
  invalid(reason, slug = null) {
    if (slug !== null) this.input.value = slug;
    this.input.setAttribute("aria-invalid", "true");
    if (reason !== null) this.hint.textContent = reason;
    this.hint.classList.add("invalid");
    if (reason === null) this.input.focus();
  }
}
