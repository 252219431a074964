// Search (PROTOCOL.md "Page hooks (1.2)"): `[data-testid=search-input]`,
// where Enter searches, and `[data-testid=search-results]`, a list of
// `[data-testid=search-result]` (`data-room`, `data-seq`), each a button that
// opens its room at the message; "More results" (`[data-testid=search-more]`)
// asks for the next page. User text only through textContent.
import { el } from "./dom.js";

const WHEN = { dateStyle: "medium", timeStyle: "short" };

export class SearchView {
  /** `search(q)`: Enter in the box; `more()`: the next page; `open(result)`: a result clicked;
   * `cancel()`: the box cleared (Escape). */
  constructor({ search, more, open, cancel }) {
    this.input = document.querySelector("[data-testid=search-input]");
    this.list = document.querySelector("[data-testid=search-results]");
    this.note = document.querySelector("[data-testid=search-note]");
    this.moreButton = document.querySelector("[data-testid=search-more]");
    this.open = open;
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.isComposing) {
        event.preventDefault();
        const q = this.input.value.trim();
        if (q) search(q);
      }
      if (event.key === "Escape") {
        cancel();
        this.clear();
      }
    });
    this.moreButton.addEventListener("click", () => more());
  }

  /** A search went out: the list empties (a new one) and says so. */
  searching(fresh) {
    if (fresh) this.list.replaceChildren();
    this.list.hidden = false;
    this.note.hidden = false;
    this.note.textContent = "Searching…";
    this.moreButton.hidden = true;
  }

  /** A page of results (`msg` frames' `d`), and whether there are more. */
  show(results, more) {
    for (const d of results) this.list.append(this.resultNode(d));
    this.note.hidden = this.list.children.length > 0;
    this.note.textContent = "Nothing found.";
    this.moreButton.hidden = !more;
  }

  /** The search waits for the connection, and goes out once it is back. */
  waiting() {
    this.note.hidden = false;
    this.note.textContent = "Waiting for the connection…";
    this.moreButton.hidden = true;
  }

  failed(reason) {
    this.note.hidden = false;
    this.note.textContent = `Search failed: ${reason}`;
  }

  clear() {
    this.input.value = "";
    this.list.replaceChildren();
    this.list.hidden = true;
    this.note.hidden = true;
    this.moreButton.hidden = true;
  }

  resultNode(d) {
    const item = el("li", "result");
    const button = el("button", "result-open");
    button.type = "button";
    button.dataset.testid = "search-result";
    button.dataset.room = d.room;
    button.dataset.seq = String(d.seq);
    const meta = el("span", "result-meta", `#${d.room} · ${d.sender.name}`);
    const time = el("time", "result-time", new Date(d.at).toLocaleString([], WHEN));
    time.dateTime = d.at;
    const files = d.attachments?.length ? ` [${d.attachments.map((file) => file.name).join(", ")}]` : "";
    button.append(meta, time, el("span", "result-body", `${d.body}${files}`));
    button.addEventListener("click", () => this.open(d));
    item.append(button);
    return item;
  }
}
