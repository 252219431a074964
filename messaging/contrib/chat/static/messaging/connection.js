// The page's connection to the server, as the controller sees it.
//
// A connection is an object with
//   - `transport`: its kind, shown as `[data-testid=conn]`'s `data-transport`
//     ("ws"; "sse" for server-sent events);
//   - `state` ("reconnecting", "open", "offline") and `nextTryAt` (when the
//     next try is due, in ms since the epoch, or null);
//   - `start()`, `goOffline()`, `goOnline()` (the browser's network events);
//   - `send(frame)`: the frame goes out now, or false if it cannot (not open);
// and it calls back the handlers it was made with: `onOpen()` (then the
// page rejoins its rooms and resends its outbox), `onFrame(frame)` for each
// frame in arrival order, `onClose()` when frames and acks in flight are
// lost, `onState()` on every change of `state`, and `onUnauthorized()` when
// the session is gone (4401). The WebSocket one is outbox.js's `Connection`;
// another transport implements the same and is chosen in `openConnection`.
import { Connection } from "./outbox.js";

/** The connection of `transport` to this page's server, calling `handlers` back. */
export function openConnection(transport, handlers) {
  if (transport === "ws") {
    const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/`;
    return Object.assign(new Connection({ url, ...handlers }), { transport });
  }
  throw new Error(`no connection of transport ${transport}`);
}
