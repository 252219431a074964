// The header's status: the connection (`[data-testid=conn]`, `data-state`:
// `open`, `reconnecting`, `offline`; `data-transport`: `ws` or `sse`) and
// what waits to be sent (`[data-testid=pending]`, hidden when nothing does).

const counted = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;

export class StatusView {
  constructor() {
    this.conn = document.querySelector("[data-testid=conn]");
    this.connText = document.querySelector(".conn-text");
    this.pending = document.querySelector("[data-testid=pending]");
    this.shown = { state: null, nextTryAt: null };
    // The countdown ticks even when nothing else happens.
    setInterval(() => this.shown.state === "reconnecting" && this.connection(this.shown), 1000);
  }

  /** `state` and `nextTryAt` (a reconnect's time, or null) of the connection; `transport` its kind. */
  connection({ state, nextTryAt, transport }) {
    this.shown = { state, nextTryAt, transport };
    this.conn.dataset.state = state;
    if (transport) this.conn.dataset.transport = transport;
    if (state === "open") this.connText.textContent = "Connected";
    else if (state === "offline") this.connText.textContent = "Offline";
    else if (nextTryAt === null) this.connText.textContent = "Connecting…";
    else this.connText.textContent = `Reconnecting in ${Math.max(1, Math.ceil((nextTryAt - Date.now()) / 1000))} s`;
  }

  /** `{messages, changes, reactions}` waiting in the outbox (model/commands.js `waiting`). */
  waiting({ messages, changes, reactions }) {
    const parts = [];
    if (messages) parts.push(counted(messages, "message"));
    if (changes) parts.push(counted(changes, "change"));
    if (reactions) parts.push(counted(reactions, "reaction"));
    this.pending.hidden = parts.length === 0;
    this.pending.textContent = `${parts.join(" and ")} waiting to be sent`;
  }
}
