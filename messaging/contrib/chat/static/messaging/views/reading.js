// What of a room is on screen, for its read mark: a message counts as read
// once it is on screen in a focused, visible tab: half of it, or this much
// of a tall one.
const READ_SHARE = 0.5;
const READ_HEIGHT = 48;

export class Reading {
  /** `container`: `[data-testid=messages]`; `changed()`: what is on screen may have changed. */
  constructor({ container, changed }) {
    this.container = container;
    this.visible = new Set(); // message nodes on screen, as the observer last said
    this.observer = new IntersectionObserver(
      (entries) => {
        for (const entry of entries) {
          const enough = entry.intersectionRatio >= READ_SHARE || entry.intersectionRect.height >= READ_HEIGHT;
          if (entry.isIntersecting && enough) this.visible.add(entry.target);
          else this.visible.delete(entry.target);
        }
        changed();
      },
      { root: container, threshold: [0, 0.5, 1] },
    );
    window.addEventListener("focus", changed);
    document.addEventListener("visibilitychange", changed);
  }

  /** A stored message's node, to watch. */
  watch(node) {
    this.observer.observe(node);
  }

  /** Whether the user can be reading: the tab is visible and focused. */
  attending() {
    return document.visibilityState === "visible" && document.hasFocus();
  }

  /** The seqs of `list`'s messages on screen, as the observer reported them. */
  seen(list) {
    if (!list) return [];
    return [...this.visible].filter((node) => node.parentNode === list).map((node) => Number(node.dataset.seq));
  }

  /**
   * The seqs of `list`'s messages on screen now, by the observer's rule,
   * measured rather than reported: its callback comes a frame after layout,
   * so a message that arrived just before the user switched rooms would
   * stay unread.
   */
  onScreenNow(list) {
    const root = this.container.getBoundingClientRect();
    const seen = [];
    for (let node = list.lastElementChild; node; node = node.previousElementSibling) {
      if (!node.dataset.seq) continue;
      const box = node.getBoundingClientRect();
      if (box.bottom <= root.top) break; // above the view: so is everything before it
      const height = Math.min(box.bottom, root.bottom) - Math.max(box.top, root.top);
      const enough = height >= box.height * READ_SHARE || height >= READ_HEIGHT;
      if (height > 0 && enough) seen.push(Number(node.dataset.seq));
    }
    return seen;
  }
}
