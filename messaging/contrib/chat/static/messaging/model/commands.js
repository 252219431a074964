// The page's commands that go through the outbox (outbox.js), and what its
// pending entries mean for the page. No DOM.
//
// A post, edit and delete share the room's lane (outbox.js `laneOf`); a
// "+1" has none. A thread's reply, a reaction of an emoji and a post with
// files are more of these, named here.
export const POST = "room.post";
export const EDIT = "message.edit";
export const DELETE = "message.delete";
export const REACTION = "reaction.add";
// An emoji on or off (model/emoji.js); like "+1", no lane.
export const EMOJI = "reaction.set";

/** A "+1" or an emoji. */
export function isReaction(entry) {
  return entry.t === REACTION || entry.t === EMOJI;
}

/** An edit or a delete. */
export function isChange(entry) {
  return entry.t === EDIT || entry.t === DELETE;
}

/** The edits and deletes of message `seq` of `room` among `entries` (outbox entries, oldest first). */
export function changesOf(entries, room, seq) {
  return entries.filter((entry) => isChange(entry) && entry.d.room === room && entry.d.seq === seq);
}

/** How many of this page's "+1" clicks on message `seq` of `room` are on their way. */
export function reactionsWaiting(entries, room, seq) {
  return entries.filter((entry) => entry.t === REACTION && entry.d.room === room && entry.d.seq === seq).length;
}

/** What waits in the outbox, by kind: `{messages, changes, reactions}`. */
export function waiting(entries) {
  const reactions = entries.filter(isReaction).length;
  const changes = entries.filter(isChange).length;
  return { messages: entries.length - reactions - changes, changes, reactions };
}
