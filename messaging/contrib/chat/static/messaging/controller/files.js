// Files: each file picked is uploaded (`POST /api/uploads`, with a progress
// bar), then posted to the room it was picked in, through the outbox, as a
// message of its own. Its key and its post's id are minted once and kept
// with the file in the browser's store (model/files.js) until the post is
// in the outbox: a reload, or a request lost on its way, sends the same key
// again and the server answers the upload it has; the post's one id keeps
// it a single message. What the uploads answer is known here too, so an own
// post shows its files before the server's `msg` lists them.
import { PendingUpload, uploadOutcome } from "../model/files.js";
import { POST } from "../model/commands.js";
import { backoffDelay, timeOrderedId } from "../outbox.js";

const UPLOADS_URL = "/api/uploads";

function csrfToken() {
  return document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/)?.[1] ?? "";
}

export class FilesController {
  /** `page`: controller/page.js ChatPage. */
  constructor(page) {
    this.page = page;
    this.uploads = new Map(); // key -> PendingUpload
    this.known = new Map(); // upload id -> {upload, name, size, content_type, url}
  }

  get view() {
    return this.page.views.uploads;
  }

  /** Files picked in the room on screen: each one an upload, then a post. */
  async picked(files) {
    const room = this.page.model.current;
    if (!room) return;
    for (const file of files) {
      const upload = new PendingUpload({
        key: timeOrderedId(),
        postId: timeOrderedId(),
        room: room.slug,
        name: file.name,
        type: file.type || "application/octet-stream",
        file,
        order: Date.now(),
      });
      await this.page.store.putUpload(upload.record);
      this.start(upload);
    }
  }

  /** What the browser kept from before a reload: each upload goes on with its key. */
  async load() {
    for (const record of await this.page.store.uploads()) {
      if (!this.uploads.has(record.key)) this.start(new PendingUpload(record));
    }
  }

  start(upload) {
    this.uploads.set(upload.key, upload);
    this.view.draw(upload);
    if (upload.upload) this.post(upload);
    else this.send(upload);
  }

  send(upload) {
    upload.attempts += 1;
    const request = new XMLHttpRequest();
    request.open("POST", UPLOADS_URL);
    request.setRequestHeader("Content-Type", upload.type);
    request.setRequestHeader("Upload-Filename", encodeURIComponent(upload.name));
    request.setRequestHeader("Idempotency-Key", upload.key);
    request.setRequestHeader("X-CSRFToken", csrfToken());
    request.upload.addEventListener("progress", (event) => {
      if (!event.lengthComputable) return;
      upload.progress = event.loaded / event.total;
      this.view.draw(upload);
    });
    const settle = () => this.answered(upload, request.status, request.responseText);
    request.addEventListener("load", settle);
    request.addEventListener("error", settle);
    request.addEventListener("timeout", settle);
    request.send(upload.file);
  }

  async answered(upload, status, text) {
    if (!this.uploads.has(upload.key)) return; // discarded meanwhile
    const outcome = uploadOutcome(status);
    let answer = null;
    try {
      answer = JSON.parse(text);
    } catch {
      // not JSON: a proxy's page, a connection that broke
    }
    if (outcome === "done" && answer?.upload) {
      upload.upload = answer;
      upload.progress = 1;
      await this.page.store.putUpload(upload.record);
      this.post(upload);
    } else if (outcome === "failed") {
      upload.error = answer?.error?.message || answer?.error?.code || `HTTP ${status}`;
      this.view.draw(upload);
    } else {
      // The same key again, later: the server answers the upload if it has it.
      upload.progress = 0;
      this.view.draw(upload);
      setTimeout(() => this.uploads.has(upload.key) && this.send(upload), backoffDelay(upload.attempts));
    }
  }

  /** The file is uploaded: its post goes into the outbox with the id minted with it, then the upload is done. */
  async post(upload) {
    this.known.set(upload.upload.upload, upload.upload);
    await this.page.outbox.submit(POST, upload.postData(), { id: upload.postId });
    await this.page.store.deleteUpload(upload.key);
    this.uploads.delete(upload.key);
    this.view.remove(upload);
  }

  /** A refused upload given up: nothing of it stays. */
  async discard(upload) {
    this.uploads.delete(upload.key);
    this.view.remove(upload);
    await this.page.store.deleteUpload(upload.key);
  }
}
