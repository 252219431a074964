// The page's commands that are not the outbox's (joins, receipts, pages of
// history and members, typing, invitations' answers...), each answered by
// its ack. They are safe to ask again, so none outlives its connection: when
// it is lost, or an `error` frame names one (the server could not send its
// answer), its `lost` callback runs instead of `answered` (given that frame's
// `error` in the second case).

export class Requests {
  /** `send(frame)`: put a frame on the connection, false if it cannot. */
  constructor(send) {
    this.send = send;
    this.waiting = new Map(); // command id -> {answered, lost}
  }

  /**
   * Send command `t` with `d`; `answered(ack)` gets its ack, `lost()` runs
   * if none can come. Returns its id, or null if it could not be sent.
   */
  ask(t, d, { answered = () => {}, lost = () => {} } = {}) {
    const id = crypto.randomUUID();
    if (!this.send({ id, t, d })) return null;
    this.waiting.set(id, { answered, lost });
    return id;
  }

  /** An ack: whether it answered one of these. */
  answer(frame) {
    const request = this.waiting.get(frame.id);
    if (!request) return false;
    this.waiting.delete(frame.id);
    request.answered(frame);
    return true;
  }

  /** An `error` frame: whether it named one of these, which then counts as lost. */
  failed(frame) {
    const request = this.waiting.get(frame.error?.id);
    if (!request) return false;
    this.waiting.delete(frame.error.id);
    request.lost(frame.error);
    return true;
  }

  /** The connection is gone: nothing in flight will be answered. */
  lost() {
    const requests = [...this.waiting.values()];
    this.waiting.clear();
    for (const request of requests) request.lost();
  }
}
