// The chat page: wires the outbox and the connection (outbox.js) to the DOM.
//
// Inbound messages are identified by (room, seq): repeats are dropped, they are
// shown in seq order, and a gap makes the page rejoin the room with `since`.
// A message of this user is one bubble from the optimistic copy to the
// server's `msg`, keyed by its command id. Its state comes from the server's
// `state` frames and the `state` of its backlog `msg`, and in a room whose
// members the page knows all of, also from the members' watermarks. A stored
// message carries a "+1" button whose count is the highest the server has
// told (acks and `reaction` frames); a click is an outbox entry like a post.
// A room is resumed by its change cursor (`rev`, changes.js): a rejoin with
// `since_rev` brings every post, edit, delete and count it missed. Edits and
// deletes (edits.js), unread badges and the divider (unread.js) and
// scroll-back (history.js) have modules of their own.
// User text only ever goes through textContent.
import { GAP_WAIT_MS, RevCursor } from "./changes.js";
import { addControls, DELETE, EDIT, settle, showPending, showVersion } from "./edits.js";
import { History } from "./history.js";
import { ACK_TIMEOUT_MS, backoffDelay, Connection, Outbox } from "./outbox.js";
import { People } from "./people.js";
import { IdbStore } from "./store.js";
import { badge, placeDivider, showBadge, Unread } from "./unread.js";

const RECEIPT_BATCH_MS = 300;
const REACTION = "reaction.add";
const ROOM_SLUG = /^[a-z0-9][a-z0-9-]{0,63}$/;
// A room joined while online opens on its join's answer; with none in the
// time any command waits for its ack, it opens anyway.
const JOIN_OPEN_WAIT_MS = ACK_TIMEOUT_MS;
const RANK = { sending: 0, sent: 1, delivered: 2, read: 3 };
const STATE_LABEL = { sending: "Sending", sent: "Sent", delivered: "Delivered", read: "Read", failed: "Failed" };

// This user's id as frames carry it: a number, or a string for a UUID key.
// Compared with `===` to ids from frames, and it names the user's outbox.
const me = JSON.parse(document.getElementById("messaging-me").textContent);
const $ = (selector) => document.querySelector(selector);
const ui = {
  conn: $("[data-testid=conn]"),
  connText: $(".conn-text"),
  pending: $("[data-testid=pending]"),
  roomForm: $("[data-testid=room-form]"),
  roomInput: $("[data-testid=room-input]"),
  roomHint: $("#room-hint"),
  roomList: $("[data-testid=room-list]"),
  dmList: $("[data-testid=dm-list]"),
  roomPrivate: $("[data-testid=room-private]"),
  title: $("#room-title"),
  empty: $("[data-testid=empty]"),
  messages: $("[data-testid=messages]"),
  composerForm: $("[data-testid=composer-form]"),
  composer: $("[data-testid=composer]"),
  send: $("[data-testid=send]"),
  loadOlder: $("[data-testid=load-older]"),
};

const rooms = new Map();
const bubbles = new Map(); // key -> Bubble; own messages by command id, others by room#seq
let current = null;
let store;
let outbox;
let connection;
let history;
let people;
const ROOM_HINT = ui.roomHint.textContent;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// Rooms ------------------------------------------------------------------

class Room {
  constructor(slug) {
    this.slug = slug;
    // Highest seq up to which every message is shown; null until the first
    // message after a join without `since` tells where the backlog starts.
    this.shown = null;
    this.held = new Map(); // seq -> msg that arrived past a gap
    this.members = new Map(); // user id -> {name, delivered, read, joined_seq}
    // Whether the join ack listed only some of the members (a room of more
    // than the server's MEMBERS_ON_JOIN): then states are the server's alone.
    this.partial = false;
    this.total = 0; // members, as the last join ack counted them
    // seq -> the server's state of an own message the page has no bubble for yet.
    this.early = new Map();
    this.reactions = new Map(); // seq -> highest "+1" count seen
    this.bySeq = new Map(); // seq -> Bubble
    this.joining = null; // id of the join in flight
    this.answered = null; // called once the join in flight is answered (or lost)
    this.readMark = 0;
    this.reported = { delivered: 0, read: 0 };
    this.cursor = new RevCursor();
    this.gapTimer = null;
    this.unread = new Unread();
    this.dividerPending = false;
    this.noOlder = false;
    this.loadingOlder = false;
    this.list = el("ol", "message-list");
    this.list.setAttribute("aria-label", `Messages in ${slug}`);
    this.list.hidden = true;
    ui.messages.append(this.list);
    const item = el("li");
    item.dataset.testid = "room-item";
    item.dataset.room = slug;
    this.button = el("button", "room-button", `# ${slug}`);
    this.button.type = "button";
    this.button.addEventListener("click", () => select(this));
    this.badge = badge();
    this.button.append(this.badge);
    item.append(this.button);
    ui.roomList.append(item);
  }

  oldestSeq() {
    let oldest = null;
    for (const seq of this.bySeq.keys()) if (oldest === null || seq < oldest) oldest = seq;
    return oldest;
  }

  showUnread() {
    showBadge(this.badge, this.unread.count(this.bySeq, this.readMark, isUnread));
  }

  /**
   * The state the server records for message `seq` of `sender`, by the
   * recipients rule; in a room the page knows only some members of, "sent"
   * (the server's `state` frames tell the rest).
   */
  stateOf(seq, sender) {
    if (this.partial) return "sent";
    const recipients = [...this.members].filter(([id, m]) => id !== sender && m.joined_seq < seq).map(([, m]) => m);
    if (recipients.length === 0) return "sent";
    if (recipients.every((m) => m.read >= seq)) return "read";
    if (recipients.every((m) => m.delivered >= seq)) return "delivered";
    return "sent";
  }

  readers(seq, sender) {
    return [...this.members].filter(([id, m]) => id !== sender && m.read >= seq).map(([id, m]) => (id === me ? "you" : m.name));
  }
}

/** Unread to this user: someone else's message, not deleted. */
const isUnread = (bubble) => !bubble.own && !bubble.deleted;

function roomFor(slug) {
  let room = rooms.get(slug);
  if (!room) {
    room = new Room(slug);
    rooms.set(slug, room);
  }
  return room;
}

let selections = 0; // how many times a room was put on screen

function select(room) {
  // What the observer has not reported yet counts too: the user saw it before leaving.
  if (current && current !== room) markRead(onScreenNow());
  current = room;
  selections += 1;
  for (const other of rooms.values()) {
    other.list.hidden = other !== room;
    if (other === room) other.button.setAttribute("aria-current", "true");
    else other.button.removeAttribute("aria-current");
  }
  ui.title.textContent = room.direct ?? `# ${room.slug}`;
  ui.empty.hidden = true;
  ui.composer.disabled = false;
  ui.send.disabled = false;
  localStorage.setItem(`messaging:${me}:room`, room.slug);
  // The divider marks what was unread as the room opens; before its backlog is in, once it is.
  room.dividerPending = true;
  placeDividerOnceIn(room);
  history?.show(room);
  people.show(room.slug);
  scrollToEnd();
  markRead();
}

function placeDividerOnceIn(room) {
  if (!room.dividerPending || room !== current || !room.unread.known || room.cursor.replayLeft > 0) return;
  room.dividerPending = false;
  placeDivider(room.list, room.unread.firstUnread(room.bySeq, room.readMark, isUnread));
}

/** A direct room, listed apart under the other person's name. */
function labelDirect(slug, name) {
  const room = rooms.get(slug);
  if (!room || room.direct === name) return;
  room.direct = name;
  room.button.textContent = name;
  ui.dmList.append(room.button.parentNode);
  if (room === current) ui.title.textContent = name;
}

/** A room the user left or was removed from: off the page, not rejoined. */
function dropRoom(slug) {
  const room = rooms.get(slug);
  if (!room) return;
  rooms.delete(slug);
  room.list.remove();
  room.button.parentNode.remove();
  store.dropRoom(slug);
  if (current === room) {
    current = null;
    ui.title.textContent = "No room yet";
    ui.empty.hidden = false;
    ui.composer.disabled = ui.send.disabled = true;
  }
}

/**
 * A new room opens once the server has its membership (the join's answer,
 * within milliseconds), so a room on screen is a room joined: a post anyone
 * makes after that counts this user among its recipients. Offline, the
 * join waits for the connection and the room opens at once; a join with no
 * answer in JOIN_OPEN_WAIT_MS (5 s) opens it anyway.
 */
async function joinRoom(slug, { select: show = true } = {}) {
  if (!rooms.has(slug)) {
    await store.addRoom(slug);
    const room = roomFor(slug);
    join(room);
    if (show && room.joining) {
      const before = selections;
      await answerOf(room);
      // The user opened another room meanwhile, or this one is gone.
      if (selections !== before || rooms.get(slug) !== room) return;
    }
  }
  if (!show) return;
  select(rooms.get(slug));
  ui.composer.focus();
}

function answerOf(room) {
  return new Promise((resolve) => {
    const timer = setTimeout(done, JOIN_OPEN_WAIT_MS);
    function done() {
      clearTimeout(timer);
      room.answered = null;
      resolve();
    }
    room.answered = done;
  });
}

/**
 * (Re)join with `since_rev` once the room's cursor has started, so the
 * backlog is exactly what changed since: posts, edits, deletes and reaction
 * counts (which once needed `reactions_from`).
 */
function join(room) {
  const id = crypto.randomUUID();
  clearTimeout(room.gapTimer);
  room.gapTimer = null;
  const d = { room: room.slug, ...room.cursor.joinData() };
  if (connection.send({ id, t: "room.join", d })) room.joining = id;
  return id;
}

/** After a frame with a rev: rejoin if the room is behind, or if a skipped rev stays missing. */
function checkCursor(room) {
  placeDividerOnceIn(room);
  if (room === current) history.update();
  const missing = room.cursor.missing();
  if (missing === null || room.joining || connection.state !== "open") return;
  if (missing === "behind") join(room);
  else if (room.gapTimer === null) {
    room.gapTimer = setTimeout(() => {
      room.gapTimer = null;
      if (room.cursor.missing() !== null && !room.joining && connection.state === "open") join(room);
    }, GAP_WAIT_MS);
  }
}

// Bubbles ----------------------------------------------------------------

const SVG = "http://www.w3.org/2000/svg";
// 20x16 line icons: a clock, one tick, two ticks, an exclamation mark.
const ICONS = {
  sending: ["M10 1.5a6.5 6.5 0 1 0 0 13 6.5 6.5 0 0 0 0-13Z", "M10 4.5V8l2.5 1.5"],
  sent: ["M4.5 8.5l3.5 3.5L15.5 4.5"],
  delivered: ["M1 8.5l3.5 3.5L12 4.5", "M8 11l1 1L16.5 4.5"],
  read: ["M1 8.5l3.5 3.5L12 4.5", "M8 11l1 1L16.5 4.5"],
  failed: ["M10 1.5a6.5 6.5 0 1 0 0 13 6.5 6.5 0 0 0 0-13Z", "M10 4.5v4", "M10 11v.5"],
};

function icon(state) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 20 16");
  svg.setAttribute("aria-hidden", "true");
  for (const d of ICONS[state]) {
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", d);
    svg.append(path);
  }
  return svg;
}

const later = (a, b) => ((RANK[a] ?? -1) >= (RANK[b] ?? -1) ? a : b);

class Bubble {
  constructor({ room, id, own, body, senderId, senderName }) {
    // `confirmed`: the highest state the server itself has told (`state` frames, a backlog `msg`).
    Object.assign(this, { room, id, own, senderId, seq: null, state: null, confirmed: null });
    // What the server stores: its version (0 until stored), body, tombstone (edits.js).
    Object.assign(this, { version: 0, storedBody: body, deleted: false, editing: false, controls: null });
    this.node = el("li", own ? "msg own" : "msg");
    this.node.dataset.msgId = id;
    const meta = el("div", "meta");
    meta.append(el("span", "sender", own ? "You" : senderName));
    this.time = el("time");
    this.editedMark = null; // "(edited)", once it is (edits.js)
    meta.append(this.time);
    this.body = el("p", "body", body);
    this.node.append(meta, this.body);
    const foot = el("div", "foot");
    this.foot = foot;
    // "+1", shown once the message has a seq to react to.
    this.reactButton = el("button", "react", "+1");
    this.reactButton.type = "button";
    this.reactButton.dataset.testid = "react";
    this.reactButton.hidden = true;
    this.reactionCount = el("span", "count");
    this.reactionCount.dataset.testid = "reaction-count";
    this.reactButton.append(this.reactionCount);
    this.reactionError = null;
    this.stateButton = el("button", "state");
    this.stateButton.type = "button";
    this.stateButton.setAttribute("aria-expanded", "false");
    foot.append(this.reactButton, this.stateButton);
    this.node.append(foot);
    this.readersLine = el("p", "readers");
    this.readersLine.hidden = true;
    this.node.append(this.readersLine);
    // The whole bubble toggles "who has read it" for the mouse; the state
    // button is the keyboard's way to it.
    this.node.addEventListener("click", (event) => {
      if (!event.target.closest(".actions")) this.toggleReaders();
    });
    this.stateButton.addEventListener("click", (event) => {
      event.stopPropagation();
      this.toggleReaders();
    });
    this.reactButton.addEventListener("click", (event) => {
      event.stopPropagation();
      this.reactionError = null;
      outbox.submit(REACTION, { room: this.room, seq: this.seq });
    });
  }

  setState(state) {
    if (this.state === state) return;
    if (this.state === "failed") this.node.querySelector(".actions")?.remove();
    this.state = state;
    this.node.dataset.state = state;
    // A label, not text: the bubble's text stays sender, time and body.
    this.stateButton.replaceChildren(icon(state));
    this.stateButton.setAttribute("aria-label", `${STATE_LABEL[state]}. Who has read it?`);
    this.stateButton.title = STATE_LABEL[state];
    this.updateReaders();
  }

  /** States only move forward (a stored message is past failed, too). */
  advance(state) {
    if (RANK[state] > (RANK[this.state] ?? -1)) this.setState(state);
  }

  /** A state the server told: never undone, even by a correction (`refreshStates`). */
  confirm(state) {
    this.confirmed = later(this.confirmed, state);
    this.advance(state);
  }

  stored(seq, at) {
    this.seq = seq;
    this.node.dataset.seq = String(seq);
    const room = rooms.get(this.room);
    room.bySeq.set(seq, this);
    this.showReactions();
    addControls(this, {
      edit: (body) => outbox.submit(EDIT, { room: this.room, seq, body }),
      remove: () => outbox.submit(DELETE, { room: this.room, seq }),
    });
    for (const entry of outbox.pending()) if (isChangeOf(entry, this)) showPending(this, entry);
    if (at) {
      this.time.dateTime = at;
      this.time.textContent = new Date(at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    }
    this.advance(room.stateOf(seq, this.senderId));
    if (room.early.has(seq)) {
      this.confirm(room.early.get(seq));
      room.early.delete(seq);
    }
  }

  toggleReaders() {
    const open = this.readersLine.hidden;
    this.readersLine.hidden = !open;
    this.stateButton.setAttribute("aria-expanded", String(open));
    this.updateReaders();
  }

  updateReaders() {
    if (this.readersLine.hidden) return;
    if (this.seq === null) {
      this.readersLine.textContent = this.state === "failed" ? "Not sent." : "Not sent yet.";
      return;
    }
    const room = rooms.get(this.room);
    if (room.partial) {
      // Too many members to know each one's watermarks: only what the server
      // said of an own message's state, and nothing of others' messages.
      if (!this.own) this.readersLine.textContent = `Who has read it is not shown in a room of ${room.total} members.`;
      else this.readersLine.textContent = this.state === "read" ? "Read by everyone." : "Not read by everyone yet.";
      return;
    }
    const names = room.readers(this.seq, this.senderId);
    this.readersLine.textContent = names.length ? `Read by ${names.join(", ")}` : "Not read by anyone yet.";
  }

  /** The server's count, never one of ours added ahead of it; our clicks on their way show as pending. */
  showReactions() {
    if (this.deleted) return;
    const count = rooms.get(this.room).reactions.get(this.seq) ?? 0;
    const waiting = outbox.pending().filter((e) => e.t === REACTION && e.d.room === this.room && e.d.seq === this.seq).length;
    this.reactionCount.textContent = String(count);
    this.reactionCount.hidden = count === 0;
    this.reactButton.toggleAttribute("data-pending", waiting > 0);
    this.reactButton.toggleAttribute("data-failed", this.reactionError !== null);
    let label = `+1 reaction, ${count || "none"} so far`;
    if (waiting) label += `, ${waiting} of yours on the way`;
    if (this.reactionError) label += `; your last one was not counted: ${this.reactionError}`;
    this.reactButton.setAttribute("aria-label", label);
    this.reactButton.title = label;
    this.reactButton.hidden = false;
  }

  failed(entry) {
    this.setState("failed");
    this.node.querySelector(".actions")?.remove();
    const actions = el("div", "actions");
    actions.append(el("span", "error", `Not sent: ${entry.error.message || entry.error.code}`));
    const retry = el("button", "retry", "Retry");
    const discard = el("button", "discard", "Discard");
    retry.type = discard.type = "button";
    retry.addEventListener("click", () => retryFailed(entry, this));
    discard.addEventListener("click", () => discardFailed(entry, this));
    actions.append(retry, discard);
    this.node.append(actions);
  }

  /** In seq order; messages not yet stored stay last, in the order they were written. */
  place() {
    const list = rooms.get(this.room).list;
    if (this.seq === null) {
      list.append(this.node);
      return;
    }
    let before = null;
    for (const node of list.children) {
      const seq = node.dataset.seq ? Number(node.dataset.seq) : Infinity;
      if (node !== this.node && seq > this.seq) {
        before = node;
        break;
      }
    }
    if (this.node.nextSibling !== before || this.node.parentNode !== list) list.insertBefore(this.node, before);
    observer.observe(this.node);
  }
}

function ownBubble(entry) {
  let bubble = bubbles.get(entry.id);
  if (!bubble) {
    const room = roomFor(entry.d.room);
    bubble = new Bubble({ room: room.slug, id: entry.id, own: true, body: entry.d.body, senderId: me });
    bubbles.set(entry.id, bubble);
    bubble.setState("sending");
    bubble.place();
    if (room === current) scrollToEnd();
  }
  return bubble;
}

const isChange = (entry) => entry.t === EDIT || entry.t === DELETE;
const isChangeOf = (entry, bubble) => isChange(entry) && entry.d.room === bubble.room && entry.d.seq === bubble.seq;

function retryFailed(entry, bubble) {
  // A retry is a new user action, so it gets a new id (the old one may be
  // refused as id_reused).
  bubbles.delete(entry.id);
  bubble.node.remove();
  store.forget(entry.id);
  outbox.submit(entry.t, entry.d);
}

function discardFailed(entry, bubble) {
  bubbles.delete(entry.id);
  bubble.node.remove();
  store.forget(entry.id);
  ui.composer.focus();
}

// Inbound ----------------------------------------------------------------

function onMsg(d) {
  const room = rooms.get(d.room);
  if (!room) return;
  room.cursor.take(d.rev);
  onMsgOf(room, d);
  room.showUnread();
  checkCursor(room);
}

function onMsgOf(room, d) {
  if (room.shown === null) room.shown = d.seq - 1;
  if (d.seq <= room.shown || room.held.has(d.seq)) {
    // A repeat may still carry a newer state (the version decides).
    const bubble = room.bySeq.get(d.seq);
    if (bubble) showVersion(bubble, d);
    return;
  }
  if (d.seq > room.shown + 1) {
    room.held.set(d.seq, d);
    if (!room.joining) join(room);
    return;
  }
  show(room, d);
  while (room.held.has(room.shown + 1)) {
    const next = room.held.get(room.shown + 1);
    room.held.delete(next.seq);
    show(room, next);
  }
  scheduleReceipts();
  // A bubble its ack placed may have been on screen before it counted as shown.
  if (room === current) markRead();
}

function show(room, d) {
  room.shown = d.seq;
  const atEnd = nearEnd();
  const bubble = storedBubble(room, d);
  if (room === current && (atEnd || bubble.own)) scrollToEnd();
}

/** The bubble of a stored message's `d` (a `msg` frame's, a history page's), made if new, in its place and state. */
function storedBubble(room, d) {
  const own = d.sender.id === me;
  const key = own ? d.id : `${room.slug}#${d.seq}`;
  let bubble = bubbles.get(key);
  if (!bubble) {
    bubble = new Bubble({ room: room.slug, id: d.id, own, body: d.body, senderId: d.sender.id, senderName: d.sender.name });
    bubbles.set(key, bubble);
  }
  bubble.stored(d.seq, d.at);
  showVersion(bubble, d);
  people.posted(room.slug, d.sender.id);
  // A backlog `msg` of an own message carries its state (an extension of the server's).
  if (own && RANK[d.state] !== undefined) bubble.confirm(d.state);
  bubble.place();
  return bubble;
}

/** A `state` frame: one of this user's messages reached `delivered` or `read`. */
function onState(d) {
  const room = rooms.get(d.room);
  if (!room || RANK[d.state] === undefined) return;
  const bubble = room.bySeq.get(d.seq);
  if (bubble) {
    if (bubble.own) bubble.confirm(d.state);
  } else if (room.shown === null || d.seq > room.shown) {
    // Not shown yet (its ack or msg is still on the way): applied when it is.
    // A seq below what is shown without a bubble is older than the backlog.
    room.early.set(d.seq, later(room.early.get(d.seq), d.state));
  }
}

/** Counts only grow: the highest seen is the latest, whatever order acks and frames came in. */
function countReaction(room, seq, count) {
  if (!Number.isInteger(count) || count <= (room.reactions.get(seq) ?? 0)) return;
  room.reactions.set(seq, count);
  room.bySeq.get(seq)?.showReactions();
}

function onJoined(room, ack) {
  room.joining = null;
  // A server before `members_total` listed every member.
  room.total = ack.d.members_total ?? ack.d.members.length;
  room.partial = room.total > ack.d.members.length;
  const newcomers = room.members.size > 0 && ack.d.members.some((m) => !room.members.has(m.user));
  for (const m of ack.d.members) {
    const known = room.members.get(m.user);
    room.members.set(m.user, {
      name: m.name,
      joined_seq: m.joined_seq,
      delivered: Math.max(m.delivered, known?.delivered ?? 0),
      read: Math.max(m.read, known?.read ?? 0),
    });
  }
  const mine = room.members.get(me);
  room.reported = { delivered: mine?.delivered ?? 0, read: mine?.read ?? 0 };
  // An empty room has no backlog to say where it starts.
  if (room.shown === null && ack.d.last_seq === 0) room.shown = 0;
  room.unread.baseline({ ...ack.d, read: mine?.read ?? 0 });
  room.cursor.joined(ack.d);
  room.showUnread();
  refreshStates(room, newcomers);
  scheduleReceipts();
  checkCursor(room);
  people.joined(room.slug, ack.d);
}

function catchUp(room, seq) {
  if (room && room.shown !== null && room.shown < seq && !room.joining && connection.state === "open") join(room);
}

function onStatus(d) {
  const room = rooms.get(d.room);
  if (!room) return;
  const member = room.members.get(d.user);
  if (!member) {
    // Someone who joined after us: the join ack tells when, which the
    // recipients rule needs (unless the ack lists only some members anyway).
    if (!room.joining && !room.partial) join(room);
    return;
  }
  member.delivered = Math.max(member.delivered, d.delivered);
  member.read = Math.max(member.read, d.read);
  // This user read on another tab or device: the badges follow.
  if (d.user === me && d.read > room.unread.read) askUnread();
  refreshStates(room);
}

/**
 * Bring shown states up to the members' watermarks. `correct`: members were
 * missing from what the states were computed with (they joined after this
 * page's join), so a state may have run ahead of the server's: set it exactly.
 */
function refreshStates(room, correct = false) {
  for (const bubble of bubbles.values()) {
    if (bubble.room !== room.slug || bubble.seq === null) continue;
    const state = room.stateOf(bubble.seq, bubble.senderId);
    if (correct) bubble.setState(later(state, bubble.confirmed));
    else bubble.advance(state);
  }
}

// Receipts: cumulative watermarks, one frame per room per batch --------------

let receiptTimer = null;
const receiptRooms = new Map(); // receipt id -> room

function scheduleReceipts() {
  if (receiptTimer === null) receiptTimer = setTimeout(flushReceipts, RECEIPT_BATCH_MS);
}

function flushReceipts() {
  receiptTimer = null;
  for (const room of rooms.values()) {
    if (room.shown === null || room.joining) continue;
    const d = { room: room.slug };
    if (room.shown > room.reported.delivered) d.delivered = room.shown;
    if (room.readMark > room.reported.read) d.read = room.readMark;
    if (d.delivered === undefined && d.read === undefined) continue;
    const id = crypto.randomUUID();
    if (!connection.send({ id, t: "receipt", d })) continue;
    receiptRooms.set(id, room);
    room.reported = { delivered: Math.max(room.reported.delivered, room.shown), read: Math.max(room.reported.read, room.readMark) };
  }
}

function onReceiptAck(room, ack) {
  if (ack.ok) {
    if (ack.d.read > room.unread.read) askUnread();
    return;
  }
  // Not moved: say it again later (watermarks are cumulative, so repeating is harmless).
  room.reported = { delivered: 0, read: 0 };
  if (ack.error.retry) setTimeout(scheduleReceipts, backoffDelay(2));
}

// Read: a message counts as read once it is on screen in a focused, visible tab:
// half of it, or this much of a tall one.
const READ_SHARE = 0.5;
const READ_HEIGHT = 48;
const visible = new Set();
const observer = new IntersectionObserver(
  (entries) => {
    for (const entry of entries) {
      if (entry.isIntersecting && (entry.intersectionRatio >= READ_SHARE || entry.intersectionRect.height >= READ_HEIGHT)) {
        visible.add(entry.target);
      } else visible.delete(entry.target);
    }
    markRead();
  },
  { root: ui.messages, threshold: [0, 0.5, 1] },
);

function markRead(alsoOnScreen = []) {
  if (!current || document.visibilityState !== "visible" || !document.hasFocus()) return;
  let mark = current.readMark;
  for (const node of [...visible, ...alsoOnScreen]) {
    const seq = Number(node.dataset.seq);
    if (node.parentNode === current.list && seq <= current.shown) mark = Math.max(mark, seq);
  }
  if (mark > current.readMark) {
    current.readMark = mark;
    current.showUnread();
    scheduleReceipts();
  }
}

/**
 * The current room's bubbles on screen now, by the observer's rule, measured
 * rather than reported: its callback comes a frame after layout, so a message
 * that arrived just before the user switched rooms would stay unread.
 */
function onScreenNow() {
  const root = ui.messages.getBoundingClientRect();
  const seen = [];
  for (let node = current.list.lastElementChild; node; node = node.previousElementSibling) {
    if (!node.dataset.seq) continue;
    const box = node.getBoundingClientRect();
    if (box.bottom <= root.top) break; // above the view: so is everything before it
    const height = Math.min(box.bottom, root.bottom) - Math.max(box.top, root.top);
    if (height > 0 && (height >= box.height * READ_SHARE || height >= READ_HEIGHT)) seen.push(node);
  }
  return seen;
}

// Connection and frames ------------------------------------------------------

let pendingJoins = new Set();
let resumeTimer = null;

function onOpen() {
  pendingJoins = new Set([...rooms.values()].map((room) => join(room)));
  // Rejoin first, then resend: a post needs the membership its join makes.
  resumeTimer = setTimeout(resume, ACK_TIMEOUT_MS);
  if (pendingJoins.size === 0) resume();
  // Rooms the user was invited to, or whose direct conversations started, while away.
  people.listRooms();
}

function resume() {
  clearTimeout(resumeTimer);
  pendingJoins.clear();
  outbox.resume();
}

function onClose() {
  clearTimeout(resumeTimer);
  pendingJoins.clear();
  outbox.pause();
  history.lost();
  unreadAsked = null;
  for (const room of rooms.values()) {
    room.joining = null;
    room.answered?.();
    room.cursor.lost();
  }
}

async function onAck(frame) {
  if (await outbox.handleAck(frame)) return;
  if (people.onAck(frame)) return;
  if (history.answered(frame, insertOlder)) return;
  if (frame.id === unreadAsked) return onRoomsList(frame);
  const room = [...rooms.values()].find((r) => r.joining === frame.id);
  if (room) {
    if (frame.ok) onJoined(room, frame);
    else {
      room.joining = null;
      if (frame.error.retry) setTimeout(() => connection.state === "open" && join(room), backoffDelay(2));
    }
    room.answered?.();
  } else if (receiptRooms.has(frame.id)) {
    onReceiptAck(receiptRooms.get(frame.id), frame);
    receiptRooms.delete(frame.id);
  }
  if (pendingJoins.delete(frame.id) && pendingJoins.size === 0) resume();
}

function onReaction(d) {
  const room = rooms.get(d.room);
  if (!room) return;
  room.cursor.take(d.rev);
  countReaction(room, d.seq, d.count);
  checkCursor(room);
}

/** `msg.edit` or `msg.delete`: shown if newer than what the bubble shows; of a message not held, scroll-back brings the current state. */
function onChanged(frame) {
  const d = frame.d;
  const room = rooms.get(d.room);
  if (!room) return;
  room.cursor.take(d.rev);
  const bubble = room.bySeq.get(d.seq);
  if (bubble) showVersion(bubble, d, { deleted: frame.t === "msg.delete" });
  if (frame.t === "msg.delete") askUnread();
  room.showUnread();
  checkCursor(room);
}

/** A message of a `room.history` page, put in above what is shown (history.js keeps the scroll position). */
function insertOlder(room, d) {
  if (!room.bySeq.has(d.seq)) storedBubble(room, d);
}

// Unread counts from the server: after receipts moved the watermark, or a delete.
let unreadAsked = null;
let unreadTimer = null;

function askUnread() {
  if (unreadTimer !== null) return;
  unreadTimer = setTimeout(() => {
    unreadTimer = null;
    const id = crypto.randomUUID();
    if (connection.send({ id, t: "rooms.list", d: {} })) unreadAsked = id;
  }, RECEIPT_BATCH_MS);
}

function onRoomsList(frame) {
  unreadAsked = null;
  if (!frame.ok) return;
  for (const entry of frame.d.rooms) {
    const room = rooms.get(entry.room);
    // An invitation's entry tells nothing of the room's messages.
    if (!room || entry.invited) continue;
    room.unread.baseline(entry);
    room.showUnread();
  }
}

const handlers = {
  ack: onAck,
  msg: (frame) => onMsg(frame.d),
  status: (frame) => onStatus(frame.d),
  state: (frame) => onState(frame.d),
  reaction: (frame) => onReaction(frame.d),
  "msg.edit": onChanged,
  "msg.delete": onChanged,
  presence: (frame) => people.onFrame(frame),
  typing: (frame) => people.onFrame(frame),
  invited: (frame) => people.onFrame(frame),
  "room.left": (frame) => people.onFrame(frame),
  error: (frame) => history.failed(frame) || console.warn("server refused a frame:", frame.error),
};

// Frames are handled one at a time, in arrival order, though some handlers
// wait for IndexedDB.
let inbound = Promise.resolve();
function onFrame(frame) {
  const handle = handlers[frame.t];
  if (handle) inbound = inbound.then(() => handle(frame)).catch((error) => console.error(error));
}

function onOutboxChange({ type, entry, ack }) {
  if (entry.t === REACTION) onReactionChange({ type, entry, ack });
  else if (isChange(entry)) onChangeChange({ type, entry, ack });
  else if (type === "pending") ownBubble(entry);
  else if (type === "acked") {
    // Stored: the ack's seq places the bubble (it may be older than the
    // backlog a reload fetched). If the msg broadcast went missing, a rejoin
    // fetches it, with anything else posted meanwhile.
    const bubble = ownBubble(entry);
    if (Number.isInteger(ack.d?.seq)) {
      bubble.stored(ack.d.seq, ack.d.at);
      bubble.place();
      setTimeout(() => catchUp(rooms.get(entry.d.room), ack.d.seq), ACK_TIMEOUT_MS);
    } else bubble.advance("sent");
  } else if (type === "failed") ownBubble(entry).failed(entry);
  showWaiting();
}

/** An edit or delete in the outbox: shown pending at once, then as the ack's version, or back with the reason. */
function onChangeChange({ type, entry, ack }) {
  if (type === "failed") store.forget(entry.id);
  const bubble = rooms.get(entry.d.room)?.bySeq.get(entry.d.seq);
  if (!bubble) return;
  if (type === "pending") showPending(bubble, entry);
  else if (type === "acked") {
    if (entry.t === EDIT) showVersion(bubble, { version: ack.d?.version, body: entry.d.body, edited_at: ack.d?.edited_at });
    else showVersion(bubble, { version: ack.d?.version }, { deleted: true });
    settle(bubble, null);
    if (entry.t === DELETE) rooms.get(entry.d.room).showUnread();
  } else if (type === "failed") settle(bubble, entry.error);
}

function onReactionChange({ type, entry, ack }) {
  // A refused click is not kept: there is nothing to retry from, the next click is a new one.
  if (type === "failed") store.forget(entry.id);
  const room = rooms.get(entry.d.room);
  if (!room) return;
  const bubble = room.bySeq.get(entry.d.seq);
  if (type === "acked") countReaction(room, entry.d.seq, ack.d?.count);
  else if (type === "failed" && bubble) bubble.reactionError = entry.error.message || entry.error.code;
  bubble?.showReactions();
}

const counted = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;

function showWaiting() {
  const pending = outbox.pending();
  const reactions = pending.filter((e) => e.t === REACTION).length;
  const changes = pending.filter(isChange).length;
  const parts = [];
  if (pending.length > reactions + changes) parts.push(counted(pending.length - reactions - changes, "message"));
  if (changes) parts.push(counted(changes, "change"));
  if (reactions) parts.push(counted(reactions, "reaction"));
  ui.pending.hidden = parts.length === 0;
  ui.pending.textContent = `${parts.join(" and ")} waiting to be sent`;
}

// Connection indicator ---------------------------------------------------------

function showConnection() {
  const { state, nextTryAt } = connection;
  ui.conn.dataset.state = state;
  if (state === "open") ui.connText.textContent = "Connected";
  else if (state === "offline") ui.connText.textContent = "Offline";
  else if (nextTryAt === null) ui.connText.textContent = "Connecting…";
  else ui.connText.textContent = `Reconnecting in ${Math.max(1, Math.ceil((nextTryAt - Date.now()) / 1000))} s`;
}

// The countdown ticks even when nothing else happens.
setInterval(() => connection && connection.state === "reconnecting" && showConnection(), 1000);

// Composer and room form -------------------------------------------------------

function nearEnd() {
  const box = ui.messages;
  return box.scrollHeight - box.scrollTop - box.clientHeight < 80;
}

function scrollToEnd() {
  ui.messages.scrollTop = ui.messages.scrollHeight;
}

function sendComposed() {
  const body = ui.composer.value.trim();
  if (!body || !current) return;
  ui.composer.value = "";
  fitComposer();
  people.stopped();
  outbox.submit("room.post", { room: current.slug, body });
}

function fitComposer() {
  ui.composer.style.height = "auto";
  ui.composer.style.height = `${Math.min(ui.composer.scrollHeight, 160)}px`;
}

ui.composerForm.addEventListener("submit", (event) => {
  event.preventDefault();
  sendComposed();
  ui.composer.focus();
});
ui.composer.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    sendComposed();
  }
});
ui.composer.addEventListener("input", () => {
  fitComposer();
  people.typed(current?.slug, ui.composer.value);
});

ui.roomForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const slug = ui.roomInput.value.trim().toLowerCase();
  if (!ROOM_SLUG.test(slug)) {
    ui.roomInput.setAttribute("aria-invalid", "true");
    ui.roomHint.classList.add("invalid");
    ui.roomInput.focus();
    return;
  }
  ui.roomInput.removeAttribute("aria-invalid");
  ui.roomHint.textContent = ROOM_HINT;
  ui.roomHint.classList.remove("invalid");
  ui.roomInput.value = "";
  if (!ui.roomPrivate.checked) {
    joinRoom(slug);
    return;
  }
  people.createPrivate(slug, (ack) => {
    if (ack.ok) {
      ui.roomPrivate.checked = false;
      joinRoom(slug);
      return;
    }
    ui.roomInput.value = slug;
    ui.roomInput.setAttribute("aria-invalid", "true");
    ui.roomHint.textContent = `Not created: ${ack.error.message || ack.error.code}`;
    ui.roomHint.classList.add("invalid");
  });
});

window.addEventListener("focus", markRead);
document.addEventListener("visibilitychange", markRead);
// Until start() has opened the store there is no connection yet; it reads
// navigator.onLine itself.
window.addEventListener("offline", () => connection?.goOffline());
window.addEventListener("online", () => connection?.goOnline());

// Start --------------------------------------------------------------------------

async function start() {
  store = await IdbStore.open(`messaging-user-${me}`);
  const wsUrl = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/`;
  connection = new Connection({
    url: wsUrl,
    onOpen,
    onClose,
    onFrame,
    onState: showConnection,
    // The host's sign-in (the view's LOGIN_URL), back to this page after.
    onUnauthorized: () => location.assign(document.body.dataset.loginUrl),
  });
  outbox = new Outbox({ store, transmit: (frame) => connection.send(frame), onChange: onOutboxChange });
  people = new People({ me, send: (frame) => connection.send(frame), openRoom: joinRoom, labelDirect, dropRoom });
  for (const slug of await store.rooms()) roomFor(slug);
  history = new History({ container: ui.messages, button: ui.loadOlder, send: (frame) => connection.send(frame) });
  for (const entry of await store.failed()) {
    if (entry.t === REACTION || isChange(entry)) store.forget(entry.id); // a page closed before it could
    else ownBubble(entry).failed(entry);
  }
  await outbox.load();
  const last = rooms.get(localStorage.getItem(`messaging:${me}:room`)) ?? [...rooms.values()][0];
  if (last) select(last);
  if (navigator.onLine) connection.start();
  else connection.goOffline();
}

start();
