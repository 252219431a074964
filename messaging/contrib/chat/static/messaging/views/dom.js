// The views' one DOM helper. User text only ever goes through textContent.

/** A new `tag` element with `className` and, if given, `text` as its text. */
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** A `type="button"` button with a `data-testid` hook. */
export function button(className, text, testid) {
  const node = el("button", className, text);
  node.type = "button";
  if (testid) node.dataset.testid = testid;
  return node;
}
