// The page's rev cursor (model/changes.js): `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { AHEAD_LIMIT, newer, RevCursor } from "../../messaging/contrib/chat/static/messaging/model/changes.js";

test("a first join starts the cursor at rev_upto once its backlog is in", () => {
  const cursor = new RevCursor();
  assert.deepEqual(cursor.joinData(), {});
  cursor.joined({ last_rev: 7, rev_upto: 7, replayed: 2 });
  assert.equal(cursor.rev, null);
  cursor.take(5);
  assert.equal(cursor.rev, null);
  cursor.take(9); // a backlog message edited since the ack: its rev is past rev_upto
  assert.equal(cursor.rev, 7);
  assert.deepEqual(cursor.joinData(), { since_rev: 7 });
});

test("live frames move the cursor one rev at a time and a skipped rev is a gap", () => {
  const cursor = new RevCursor();
  cursor.joined({ last_rev: 3, rev_upto: 3, replayed: 0 });
  cursor.take(4);
  assert.equal(cursor.rev, 4);
  cursor.take(6);
  assert.equal(cursor.rev, 4);
  assert.equal(cursor.missing(), "gap");
  cursor.take(5);
  assert.equal(cursor.rev, 6);
  assert.equal(cursor.missing(), null);
  cursor.take(2); // a repeat
  assert.equal(cursor.rev, 6);
});

test("a replay cut off by a lost socket leaves the cursor where it was", () => {
  const cursor = new RevCursor();
  cursor.joined({ last_rev: 3, rev_upto: 3, replayed: 0 });
  cursor.joined({ last_rev: 20, rev_upto: 12, replayed: 3 });
  cursor.take(8);
  cursor.lost();
  assert.equal(cursor.rev, 3);
  assert.deepEqual(cursor.joinData(), { since_rev: 3 });
});

test("a replay short of last_rev asks for another join from where it stopped", () => {
  const cursor = new RevCursor();
  cursor.joined({ last_rev: 3, rev_upto: 3, replayed: 0 });
  cursor.joined({ last_rev: 20, rev_upto: 12, replayed: 1 });
  assert.equal(cursor.missing(), null); // its frames are still on their way
  cursor.take(12);
  assert.equal(cursor.rev, 12);
  assert.equal(cursor.missing(), "behind");
  assert.deepEqual(cursor.joinData(), { since_rev: 12 });
});

test("too many revs past a gap call for a rejoin at once", () => {
  const cursor = new RevCursor();
  cursor.joined({ last_rev: 1, rev_upto: 1, replayed: 0 });
  for (let rev = 3; rev <= AHEAD_LIMIT + 3; rev += 1) cursor.take(rev);
  assert.equal(cursor.missing(), "behind");
});

test("a change applies only when its version is higher", () => {
  assert.equal(newer(3, 2), true);
  assert.equal(newer(2, 2), false);
  assert.equal(newer(1, undefined), true);
  assert.equal(newer("3", 1), false);
});
