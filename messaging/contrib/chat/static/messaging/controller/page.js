// The chat page's controller: it makes the model, the views, the
// connection (connection.js), the outbox (outbox.js) and the requests in
// flight, and wires them: a frame goes to its handler in arrival order, an
// ack to the outbox or to the request it answers, a user action to the
// controller of its concern (rooms.js, messages.js, people.js).
//
// A feature to come adds a line to `frames` for each frame type it brings,
// its view to `views()`, and its own controller beside the others.
import { ChatModel } from "../model/rooms.js";
import { openConnection } from "../connection.js";
import { Outbox, servedLanes } from "../outbox.js";
import { Composer, RoomForm } from "../views/composer.js";
import { Conversation } from "../views/conversation.js";
import { HistoryView } from "../views/history.js";
import { ThreadPanel } from "../views/thread.js";
import { SearchView } from "../views/search.js";
import { UploadsView } from "../views/uploads.js";
import { InvitationsView } from "../views/invitations.js";
import { PeopleView } from "../views/people.js";
import { Reading } from "../views/reading.js";
import { Sidebar } from "../views/sidebar.js";
import { StatusView } from "../views/status.js";
import { PICKER } from "../model/emoji.js";
import { EmojiController } from "./emoji.js";
import { FilesController } from "./files.js";
import { MessagesController } from "./messages.js";
import { PeopleController } from "./people.js";
import { Requests } from "./requests.js";
import { RoomsController } from "./rooms.js";
import { SearchController } from "./search.js";
import { ThreadsController } from "./threads.js";

export class ChatPage {
  /**
   * `me`: this user's id as frames carry it; `store`: the outbox's store
   * (store.js); `transport`: the connection's kind (connection.js).
   */
  constructor({ me, store, transport = "ws" }) {
    this.model = new ChatModel(me);
    this.store = store;
    this.rooms = new RoomsController(this);
    this.messages = new MessagesController(this);
    this.people = new PeopleController(this);
    this.files = new FilesController(this);
    this.search = new SearchController(this);
    this.threads = new ThreadsController(this);
    this.emoji = new EmojiController(this);
    this.views = this.makeViews(me);
    this.connection = openConnection(transport, {
      onOpen: () => this.opened(),
      onClose: () => this.lost(),
      onFrame: (frame) => this.receive(frame),
      onState: () => this.views.status.connection(this.connection),
      // The host's sign-in (the view's LOGIN_URL), back to this page after.
      onUnauthorized: () => location.assign(document.body.dataset.loginUrl),
    });
    const send = (frame) => this.connection.send(frame);
    this.requests = new Requests(send);
    this.outbox = new Outbox({
      store,
      transmit: send,
      onChange: (change) => this.messages.outboxChanged(change),
      lanes: servedLanes(document.body.dataset.lanes),
    });
    // Frames are handled one at a time, in arrival order, though some handlers
    // wait for IndexedDB.
    this.inbound = Promise.resolve();
    this.frames = new Map([
      ["ack", (frame) => this.acked(frame)],
      ["msg", (frame) => this.messages.msg(frame.d)],
      ["state", (frame) => this.messages.state(frame.d)],
      ["reaction", (frame) => this.messages.reaction(frame.d)],
      ["reactions", (frame) => this.emoji.reactions(frame.d)],
      ["thread", (frame) => this.threads.thread(frame.d)],
      ["msg.edit", (frame) => this.messages.changed(frame)],
      ["msg.delete", (frame) => this.messages.changed(frame)],
      ["status", (frame) => this.rooms.status(frame.d)],
      ["presence", (frame) => this.people.presence(frame.d)],
      ["typing", (frame) => this.people.typing(frame.d)],
      ["invited", () => this.people.listRooms()],
      ["room.left", (frame) => this.people.left(frame.d)],
      ["error", (frame) => this.requests.failed(frame) || console.warn("server refused a frame:", frame.error)],
    ]);
    window.addEventListener("offline", () => this.connection.goOffline());
    window.addEventListener("online", () => this.connection.goOnline());
  }

  makeViews(me) {
    const $ = (selector) => document.querySelector(selector);
    const container = $("[data-testid=messages]");
    const reading = new Reading({ container, changed: () => this.rooms.markRead() });
    const messages = this.messages;
    const actions = {
      react: (message) => messages.react(message),
      toggle: (message, emoji) => this.emoji.toggle(message, emoji),
      reply: (message) => this.threads.open(message),
      edit: (message, body) => messages.edit(message, body),
      remove: (message) => messages.remove(message),
      retry: (message) => messages.retry(message),
      discard: (message) => messages.discard(message),
      picker: PICKER,
    };
    return {
      reading,
      status: new StatusView(),
      sidebar: new Sidebar({
        roomList: $("[data-testid=room-list]"),
        dmList: $("[data-testid=dm-list]"),
        open: (slug) => this.model.room(slug) && this.rooms.select(this.model.room(slug)),
      }),
      invitations: new InvitationsView({
        list: $("[data-testid=invitations]"),
        title: $("[data-testid=invitations-title]"),
        accept: (slug) => this.people.accept(slug),
        decline: (slug) => this.people.decline(slug),
      }),
      conversation: new Conversation({
        container,
        title: $("#room-title"),
        empty: $("[data-testid=empty]"),
        actions,
        placed: (node) => reading.watch(node),
      }),
      thread: new ThreadPanel({
        parent: $("main.room"),
        actions,
        send: (body) => this.threads.send(body),
        close: () => this.threads.close(),
      }),
      history: new HistoryView({
        container,
        button: $("[data-testid=load-older]"),
        wanted: () => messages.wantOlder(),
      }),
      people: new PeopleView({
        me,
        message: (userId) => this.people.openDirect(userId),
        invite: (text) => this.people.invite(text),
      }),
      composer: new Composer({ send: (body) => messages.post(body), typed: (text) => this.people.typed(text) }),
      uploads: new UploadsView({
        picked: (files) => this.files.picked(files),
        discard: (upload) => this.files.discard(upload),
      }),
      search: new SearchView({
        search: (q) => this.search.search(q),
        more: () => this.search.more(),
        open: (d) => this.search.open(d),
        cancel: () => this.search.cancel(),
      }),
      roomForm: new RoomForm({ join: (slug, options) => this.joinFromForm(slug, options) }),
    };
  }

  /** Take in what the browser kept (rooms, refused and pending commands), open the last room, connect. */
  async start() {
    for (const slug of await this.store.rooms()) this.rooms.add(slug);
    this.messages.restoreFailed(await this.store.failed());
    await this.outbox.load();
    await this.files.load();
    const rooms = this.model.rooms;
    const last = rooms.get(localStorage.getItem(`messaging:${this.model.me}:room`)) ?? [...rooms.values()][0];
    if (last) this.rooms.select(last);
    this.views.status.connection(this.connection);
    if (navigator.onLine) this.connection.start();
    else this.connection.goOffline();
  }

  receive(frame) {
    const handle = this.frames.get(frame.t);
    if (handle) this.inbound = this.inbound.then(() => handle(frame)).catch((error) => console.error(error));
  }

  async acked(frame) {
    if (!(await this.outbox.handleAck(frame))) this.requests.answer(frame);
  }

  opened() {
    this.rooms.opened();
    this.search.opened();
    // Rooms the user was invited to, or whose direct conversations started, while away.
    this.people.listRooms();
  }

  lost() {
    this.outbox.pause();
    this.rooms.lost();
    this.requests.lost();
    this.messages.drawHistory();
  }

  /** The room form: a public room is joined; a private one is created first. */
  joinFromForm(slug, { private: isPrivate }) {
    if (!isPrivate) {
      this.rooms.open(slug);
      return;
    }
    this.people.createPrivate(slug, (ack) => {
      if (ack.ok) {
        this.views.roomForm.created();
        this.rooms.open(slug);
      } else this.views.roomForm.invalid(`Not created: ${ack.error.message || ack.error.code}`, slug);
    });
  }
}
