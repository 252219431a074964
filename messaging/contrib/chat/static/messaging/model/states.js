// A message's delivery states and their order (PROTOCOL.md "Message states"). No DOM.
//
// sending < sent < delivered < read: a state the page shows only moves up
// that order. "failed" (an own message the server refused) is not on it:
// it is set, never reached by moving up, and anything stored is past it.

export const RANK = Object.freeze({ sending: 0, sent: 1, delivered: 2, read: 3 });

/** Whether `state` is one of the ranked states (a frame's `state` is checked with it before use). */
export function isRanked(state) {
  return typeof state === "string" && Object.hasOwn(RANK, state);
}

/** The rank of `state`; anything not ranked (null, "failed") is below them all. */
export function rankOf(state) {
  return isRanked(state) ? RANK[state] : -1;
}

/** The later of two states. */
export function later(a, b) {
  return rankOf(a) >= rankOf(b) ? a : b;
}
