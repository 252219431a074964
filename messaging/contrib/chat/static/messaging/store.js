// The outbox's persistence: IndexedDB, one database per signed-in user.
//
// Per user, so a second account signed in on the same browser never resends
// the first one's commands. All tabs of one user share it: an entry written by
// one tab is resent by another after its reconnect, with the same id, which
// the server answers as a duplicate.

// 2: the uploads waiting to become posts (controller/files.js).
const VERSION = 2;

function request(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

function done(tx) {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error || new Error("transaction aborted"));
  });
}

export class IdbStore {
  static async open(name) {
    const req = indexedDB.open(name, VERSION);
    req.onupgradeneeded = () => {
      const db = req.result;
      for (const [name, keyPath] of [["outbox", "id"], ["failed", "id"], ["rooms", "room"], ["uploads", "key"]]) {
        if (!db.objectStoreNames.contains(name)) db.createObjectStore(name, { keyPath });
      }
    };
    return new IdbStore(await request(req));
  }

  constructor(db) {
    this.db = db;
  }

  async write(names, work) {
    const tx = this.db.transaction(names, "readwrite");
    work(tx);
    await done(tx);
  }

  async list(name) {
    return request(this.db.transaction(name).objectStore(name).getAll());
  }

  // The outbox: entries still to be acked, oldest first.
  async all() {
    return (await this.list("outbox")).sort((a, b) => a.order - b.order);
  }

  put(entry) {
    return this.write(["outbox"], (tx) => tx.objectStore("outbox").put(entry));
  }

  delete(id) {
    return this.write(["outbox"], (tx) => tx.objectStore("outbox").delete(id));
  }

  /** Move an entry out of the outbox into the failed list, in one transaction. */
  fail(entry) {
    return this.write(["outbox", "failed"], (tx) => {
      tx.objectStore("outbox").delete(entry.id);
      tx.objectStore("failed").put(entry);
    });
  }

  // Refused commands, kept so the page can still offer retry / discard after a reload.
  async failed() {
    return (await this.list("failed")).sort((a, b) => a.order - b.order);
  }

  forget(id) {
    return this.write(["failed"], (tx) => tx.objectStore("failed").delete(id));
  }

  // The rooms this user joined in this browser, rejoined after every reconnect.
  async rooms() {
    return (await this.list("rooms")).sort((a, b) => a.order - b.order).map((r) => r.room);
  }

  addRoom(room) {
    return this.write(["rooms"], (tx) => tx.objectStore("rooms").put({ room, order: Date.now() }));
  }

  // Files picked and not posted yet, with their keys (model/files.js), oldest first.
  async uploads() {
    return (await this.list("uploads")).sort((a, b) => a.order - b.order);
  }

  putUpload(record) {
    return this.write(["uploads"], (tx) => tx.objectStore("uploads").put(record));
  }

  deleteUpload(key) {
    return this.write(["uploads"], (tx) => tx.objectStore("uploads").delete(key));
  }

  /** A room the user left or was removed from: not rejoined any more. */
  dropRoom(room) {
    return this.write(["rooms"], (tx) => tx.objectStore("rooms").delete(room));
  }
}
