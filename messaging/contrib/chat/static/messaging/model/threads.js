// Threads (PROTOCOL 1.2): which of a room's messages are a root's replies, in order. No DOM.
//
// A reply is a message of the room like any other (its seq keeps the
// room's order and gaps), with `replyTo`: the page shows it in its root's
// thread panel, not in the room's list. A root's count is `replies` as the
// server told it (a `thread` frame, or a stored message's `d`), never lower.

/** The replies to `root` (a seq) among `messages`, stored ones by seq, then those on their way. */
export function repliesOf(messages, root) {
  const replies = messages.filter((message) => message.replyTo === root);
  const stored = replies.filter((message) => message.seq !== null).sort((a, b) => a.seq - b.seq);
  return [...stored, ...replies.filter((message) => message.seq === null)];
}

/** A `thread` frame's `d` (or a stored root's) for `message`: whether its count or time moved. */
export function takeThread(message, { replies, last_reply_at: lastReplyAt }) {
  if (!message || !Number.isInteger(replies) || replies <= message.replies) return false;
  message.replies = replies;
  if (typeof lastReplyAt === "string") message.lastReplyAt = lastReplyAt;
  return true;
}

/** The `room.thread` `d` of the page after `after` (null: the first). */
export function threadPage(room, seq, after) {
  return after === null ? { room, seq, limit: 100 } : { room, seq, after, limit: 100 };
}
