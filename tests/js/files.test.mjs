// Files on the page (model/files.js, and a message's `attachments`): `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  filesOf,
  PendingUpload,
  shownInline,
  sizeText,
  uploadOutcome,
} from "../../messaging/contrib/chat/static/messaging/model/files.js";
import { Message } from "../../messaging/contrib/chat/static/messaging/model/message.js";

const CAT = { upload: "u1", name: "cat.png", size: 2048, content_type: "image/png", url: "/api/uploads/u1" };
const NOTES = { upload: "u2", name: "notes.pdf", size: 10, content_type: "application/pdf", url: "/api/uploads/u2" };

test("an answer settles an upload: stored, tried again with its key, or refused for good", () => {
  assert.equal(uploadOutcome(201), "done");
  assert.equal(uploadOutcome(200), "done"); // the key's upload, stored before
  for (const status of [0, 408, 409, 429, 500, 502, 503]) assert.equal(uploadOutcome(status), "retry", status);
  for (const status of [400, 401, 403, 404, 413, 415, 422]) assert.equal(uploadOutcome(status), "failed", status);
});

test("only raster images show inline, and sizes read as people read them", () => {
  assert.equal(shownInline(CAT), true);
  assert.equal(shownInline(NOTES), false);
  assert.equal(shownInline({ ...CAT, content_type: "image/svg+xml" }), false);
  assert.deepEqual([sizeText(10), sizeText(2048), sizeText(3 * 1024 * 1024)], ["10 B", "2.0 KB", "3.0 MB"]);
});

test("an upload keeps its key and its post's id, and its post carries its file alone", () => {
  const upload = new PendingUpload({ key: "k1", postId: "p1", room: "lobby", name: "cat.png", type: "image/png", file: null, order: 1 });
  assert.deepEqual(Object.keys(upload.record).sort(), ["file", "key", "name", "order", "postId", "room", "type", "upload"]);
  upload.upload = CAT;
  assert.deepEqual(upload.postData(), { room: "lobby", body: "", attachments: ["u1"] });
  // A reload makes it again from what the store kept: the same key, the same post.
  const again = new PendingUpload(upload.record);
  assert.equal(again.key, "k1");
  assert.equal(again.postId, "p1");
  assert.deepEqual(again.upload, CAT);
});

test("a message's files come with its frames, go with its delete, and show on an own post before it is stored", () => {
  const message = new Message({ key: "p1", room: "lobby", id: "p1", own: true, senderId: 1, body: "" });
  message.command = { t: "room.post", d: { room: "lobby", body: "", attachments: ["u1", "u9"] } };
  // Before the server lists them: what the uploads answered (an unknown id shows nothing).
  assert.deepEqual(filesOf(message, new Map([["u1", CAT]])), [CAT]);
  message.applyVersion({ version: 1, body: "", attachments: [CAT, NOTES] });
  assert.deepEqual(filesOf(message, new Map()), [CAT, NOTES]);
  // An edit's frame carries no files: they stay.
  message.applyVersion({ version: 2, body: "now with words", edited_at: "2026-01-01T00:00:00.000000Z" });
  assert.deepEqual(message.attachments, [CAT, NOTES]);
  message.applyVersion({ version: 3 }, { deleted: true });
  assert.deepEqual(message.attachments, []);
  assert.deepEqual(filesOf({ ...message, command: null }, new Map()), []);
});
