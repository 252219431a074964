// Emoji reactions (PROTOCOL 1.2 `reaction.set`): `reactions` frames into the
// room's model (model/emoji.js), a click on an emoji into the outbox (one
// entry, one id, per click), and what the outbox says of it.
import { EMOJI } from "../model/commands.js";
import { wantsOn } from "../model/emoji.js";

export class EmojiController {
  /** `page`: controller/page.js ChatPage. */
  constructor(page) {
    this.page = page;
  }

  /** What `message`'s view draws of its emoji: `{emoji, emojiPending}`. */
  context(entries, room, message) {
    if (!message.stored) return { emoji: [], emojiPending: new Set() };
    const pending = entries.filter(
      (entry) => entry.t === EMOJI && entry.d.room === room.slug && entry.d.seq === message.seq,
    );
    return { emoji: room.emoji.of(message.seq), emojiPending: new Set(pending.map((entry) => entry.d.emoji)) };
  }

  /** A `reactions` frame: one emoji's count on one message. */
  reactions(d) {
    const room = this.page.model.room(d.room);
    if (!room) return;
    room.cursor.take(d.rev);
    const message = room.timeline.at(d.seq);
    if (room.emoji.take(d) && message) this.page.messages.draw(room, message);
    this.page.rooms.checkCursor(room);
  }

  /** The user clicked `emoji` on `message`: theirs goes on, or off if it is theirs. */
  toggle(message, emoji) {
    const room = this.page.model.room(message.room);
    if (!room || !message.stored || message.deleted) return;
    message.reactionError = null;
    const on = wantsOn(room.emoji, this.page.outbox.pending(), room.slug, message.seq, emoji);
    this.page.outbox.submit(EMOJI, { room: room.slug, seq: message.seq, emoji, on });
  }

  /** What the outbox says of a `reaction.set`: applied (the user's own, the count), or refused (not kept). */
  changed(type, entry, ack) {
    if (type === "failed") this.page.store.forget(entry.id);
    const room = this.page.model.room(entry.d.room);
    if (!room) return;
    if (type === "acked" && ack.d) room.emoji.acked(ack.d);
    const message = room.timeline.at(entry.d.seq);
    if (!message) return;
    if (type === "failed") message.reactionError = entry.error.message || entry.error.code;
    this.page.messages.draw(room, message);
  }
}
