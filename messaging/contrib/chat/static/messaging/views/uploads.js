// The composer's file input (`[data-testid=attach]`, an `input[type=file]`)
// and a line per upload under way (`[data-testid=upload]`, `data-name`):
// its name, a progress bar (`[data-testid=upload-progress]`, a `progress`
// from 0 to 1) and, once refused, why, with Discard.
import { el } from "./dom.js";

export class UploadsView {
  /** `picked(files)`: files were chosen; `discard(upload)`: a refused one is given up. */
  constructor({ picked, discard }) {
    this.input = document.querySelector("[data-testid=attach]");
    this.button = document.querySelector("[data-testid=attach-button]");
    this.list = document.querySelector("[data-testid=uploads]");
    this.discard = discard;
    this.lines = new Map(); // key -> {node, bar, note}
    this.input.addEventListener("change", () => {
      const files = [...this.input.files];
      this.input.value = "";
      if (files.length) picked(files);
    });
  }

  /** Whether there is a room to post files to. */
  enable(on) {
    this.input.disabled = !on;
    this.button.classList.toggle("disabled", !on);
  }

  draw(upload) {
    let line = this.lines.get(upload.key);
    if (!line) {
      const node = el("li", "upload");
      node.dataset.testid = "upload";
      node.dataset.name = upload.name;
      const bar = el("progress");
      bar.dataset.testid = "upload-progress";
      bar.max = 1;
      const note = el("span", "upload-note");
      node.append(el("span", "upload-name", upload.name), bar, note);
      line = { node, bar, note, discard: null };
      this.lines.set(upload.key, line);
      this.list.append(node);
    }
    line.bar.value = upload.progress;
    line.node.dataset.state = upload.error ? "failed" : upload.progress >= 1 ? "sent" : "sending";
    line.note.textContent = upload.error ? `Not sent: ${upload.error}` : upload.attempts > 1 ? "retrying…" : "";
    if (upload.error && !line.discard) {
      line.discard = el("button", "discard", "Discard");
      line.discard.type = "button";
      line.discard.addEventListener("click", () => this.discard(upload));
      line.node.append(line.discard);
    }
    this.list.hidden = false;
  }

  remove(upload) {
    this.lines.get(upload.key)?.node.remove();
    this.lines.delete(upload.key);
    this.list.hidden = this.lines.size === 0;
  }
}
