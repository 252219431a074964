// Every room on the page and which one is on screen: the page's model, the
// one place its state lives (the controller and the views hold none of it,
// only their timers, requests in flight and DOM nodes). No DOM.
import { Invitations } from "./invitations.js";
import { People } from "./people.js";
import { Room } from "./room.js";

export class ChatModel {
  /** `me`: this user's id as frames carry it: a number, or a string for a UUID key (compared with `===`). */
  constructor(me) {
    this.me = me;
    this.rooms = new Map(); // slug -> Room, in the order they were added
    this.current = null; // the Room on screen
    this.selections = 0; // how many times a room was put on screen
    this.people = new People(me);
    this.invitations = new Invitations();
  }

  room(slug) {
    return this.rooms.get(slug) ?? null;
  }

  /** The room of `slug`, added if new. */
  add(slug) {
    let room = this.rooms.get(slug);
    if (!room) {
      room = new Room(slug, this.me);
      this.rooms.set(slug, room);
    }
    return room;
  }

  /** Put `room` on screen. */
  select(room) {
    this.current = room;
    this.selections += 1;
    room.unread.opened();
  }

  /** A room the user left or was removed from. Returns whether it was the one on screen. */
  drop(slug) {
    const room = this.rooms.get(slug);
    this.rooms.delete(slug);
    this.people.drop(slug);
    if (!room || this.current !== room) return false;
    this.current = null;
    return true;
  }

  /** The room `slug`'s message `seq`, or null. */
  message(slug, seq) {
    return this.room(slug)?.timeline.at(seq) ?? null;
  }
}
