// Scroll-back on screen: the "Load older messages" button and the scroll
// near the top that ask for the next `room.history` page, and the user's
// place kept while older messages go in above it.
// How close to the top (px) a scroll asks for the next page.
const NEAR_TOP = 40;

export class HistoryView {
  /**
   * `wanted()`: the user asks for older messages (the button, or a scroll
   * near the top). A scroll down does not ask: the page's own scrolling to
   * the newest message moves down, and while a backlog comes in it can rest
   * a few pixels from the top when the browser fires its scroll event.
   */
  constructor({ container, button, wanted }) {
    Object.assign(this, { container, button });
    button.addEventListener("click", () => wanted());
    let lastTop = container.scrollTop;
    container.addEventListener("scroll", () => {
      const top = container.scrollTop;
      const down = top > lastTop;
      lastTop = top;
      if (!down && top < NEAR_TOP) wanted();
    });
  }

  /** The button: shown while older messages may exist, disabled while a page is on its way. */
  draw({ mayHaveOlder, loading }) {
    this.button.hidden = !mayHaveOlder;
    this.button.disabled = loading;
  }

  /** Run `insert()`, which puts messages in above what is shown, keeping what is on screen where it is. */
  keepPlace(insert) {
    const before = this.container.scrollHeight;
    const top = this.container.scrollTop;
    insert();
    this.container.scrollTop = top + (this.container.scrollHeight - before);
  }

  /** Whether the list is at its top (or does not fill the box): no scroll will come to ask again. */
  atTop() {
    const box = this.container;
    return box.scrollTop < NEAR_TOP || box.scrollHeight <= box.clientHeight;
  }
}
