// The chat page's entry point: it reads who the user is, opens their outbox's
// store and starts the page (controller/page.js). Its modules:
//
//   model/        what the page knows, no DOM and no connection, each part
//                 testable in Node (tests/js/): rooms.js (every room, the one
//                 on screen), room.js (one room), timeline.js (messages by
//                 seq: dedup, order, gaps), message.js and states.js (states
//                 that never go back, versions), members.js (watermarks),
//                 receipts.js, unread.js (badge, divider), changes.js (the
//                 rev cursor), paging.js (scroll-back), reactions.js,
//                 people.js (members, presence, typing), invitations.js,
//                 commands.js (the outbox's commands);
//   views/        the DOM, drawn from the model; user clicks go back as calls;
//   controller/   frames and the outbox into the model, then the views;
//   connection.js the connection the controller talks to: a WebSocket, or
//                 stream.js (server-sent events and POST /api/commands)
//                 where WebSockets are refused;
//   outbox.js, store.js  the outbox and its IndexedDB store.
//
// No module keeps state of its own: it all lives in the objects ChatPage makes.
// User text only ever goes through textContent.
import { ChatPage } from "./controller/page.js";
import { IdbStore } from "./store.js";

// This user's id as frames carry it: a number, or a string for a UUID key.
// Compared with `===` to ids from frames, and it names the user's outbox.
const me = JSON.parse(document.getElementById("messaging-me").textContent);

IdbStore.open(`messaging-user-${me}`).then((store) => new ChatPage({ me, store, transport: "auto" }).start());
