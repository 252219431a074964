// The views' one DOM helper. User text only ever goes through textContent.

/** A new `tag` element with `className` and, if given, `text` as its text. */
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/**
 * How the page names a user: `name`, or `name · node` for a user of another
 * deployment (PROTOCOL 1.2: frames carry each user's `node`; the page's own
 * is its body's `data-node`, empty with federation off).
 */
export function shownName(name, node) {
  return node && node !== document.body.dataset.node ? `${name} · ${node}` : name;
}

/** Whether a user of `node` is of this deployment (a direct room is made with them alone). */
export function local(node) {
  return !node || node === document.body.dataset.node;
}

/** A `type="button"` button with a `data-testid` hook. */
export function button(className, text, testid) {
  const node = el("button", className, text);
  node.type = "button";
  if (testid) node.dataset.testid = testid;
  return node;
}
