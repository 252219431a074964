// Files (PROTOCOL.md 1.2, "Files"): a message's attachments as frames list
// them, and the uploads this user started that are not posts yet. No DOM.
//
// An upload is one user action, as a post is: its key (the upload's
// `Idempotency-Key`) and the id of the post that will carry it are minted
// once, when the file is picked, and kept with the file in the browser's
// store until the post is in the outbox. A reload, or a request that failed
// on its way, sends the same key again: the server answers the upload it
// already has (the same bytes) or takes it anew, and the post goes out with
// its one id, so a file is posted once, whatever happens in between.

// Shown in the page as an image; anything else is a link (the server serves
// only these inline too).
const INLINE = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

export function shownInline(file) {
  return INLINE.has(file.content_type);
}

/** A size as people read it. */
export function sizeText(bytes) {
  if (!Number.isFinite(bytes)) return "";
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(bytes < 10 * 1024 ? 1 : 0)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/**
 * What an answer of `POST /api/uploads` means for the upload: "done" (it
 * has its `upload`), "retry" (the same key again later: the network, the
 * server busy or away) or "failed" (refused for good: too large, a type not
 * taken, a name refused...).
 */
export function uploadOutcome(status) {
  if (status === 200 || status === 201) return "done";
  if (status === 0 || status === 408 || status === 409 || status === 429 || status >= 500) return "retry";
  return "failed";
}

/** One file picked, until its post is in the outbox. */
export class PendingUpload {
  /** `file`: the Blob; `key`, `postId`: minted once; `upload`: the server's answer, once it gave one. */
  constructor({ key, postId, room, name, type, file, order, upload = null }) {
    Object.assign(this, { key, postId, room, name, type, file, order, upload });
    this.progress = 0; // 0..1 of the bytes sent
    this.error = null; // why it was refused for good
    this.attempts = 0;
  }

  /** What the browser's store keeps of it. */
  get record() {
    const { key, postId, room, name, type, file, order, upload } = this;
    return { key, postId, room, name, type, file, order, upload };
  }

  /** The `room.post` that carries it: no text, the one file. */
  postData() {
    return { room: this.room, body: "", attachments: [this.upload.upload] };
  }
}

/** The files a message shows: the server's list, or for an own post not stored yet, what its uploads said. */
export function filesOf(message, known) {
  if (message.attachments.length) return message.attachments;
  const ids = message.command?.d?.attachments ?? [];
  return ids.map((id) => known.get(id)).filter(Boolean);
}
