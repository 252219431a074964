// Members, presence, typing and invitations (model/people.js,
// model/invitations.js): `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Invitations, invitationText } from "../../messaging/contrib/chat/static/messaging/model/invitations.js";
import { People, TYPING_LAPSE_MS, TYPING_REPEAT_MS } from "../../messaging/contrib/chat/static/messaging/model/people.js";

const ME = 1;

test("typing is told at most every 3 s, and an empty composer or leaving the room stops it", () => {
  const people = new People(ME);
  assert.deepEqual(people.typed("lobby", "h", 1000), { room: "lobby", typing: true });
  assert.equal(people.typed("lobby", "he", 1000 + TYPING_REPEAT_MS - 1), null);
  assert.deepEqual(people.typed("lobby", "hel", 1000 + TYPING_REPEAT_MS), { room: "lobby", typing: true });
  assert.deepEqual(people.typed("side", "x", 5000), { room: "side", typing: true }); // another room at once
  assert.deepEqual(people.typed("side", "  ", 5001), { room: "side", typing: false });
  assert.equal(people.stopped(), null); // already stopped
  assert.equal(people.typed(null, "x", 6000), null);
});

test("who is typing: others only, until they stop, post, or their typing lapses", () => {
  const people = new People(ME);
  assert.equal(people.typing({ room: "lobby", user: ME, name: "me", typing: true }, 0), false);
  people.typing({ room: "lobby", user: 2, name: "ana", typing: true }, 0);
  people.typing({ room: "lobby", user: 3, name: "bob", typing: true }, 1000);
  assert.deepEqual(people.typists("lobby", 1000), ["ana", "bob"]);
  people.posted("lobby", 3);
  assert.deepEqual(people.typists("lobby", 1000), ["ana"]);
  assert.deepEqual(people.typists("lobby", TYPING_LAPSE_MS - 1), ["ana"]);
  assert.deepEqual(people.typists("lobby", TYPING_LAPSE_MS), []);
  people.typing({ room: "lobby", user: 2, name: "ana", typing: true }, 0);
  assert.equal(people.typing({ room: "lobby", user: 2, typing: false }, 10), true);
  assert.deepEqual(people.typists("lobby", 10), []);
});

test("presence moves a listed member; one not listed makes the panel ask again", () => {
  const people = new People(ME);
  assert.equal(people.presence({ room: "lobby", user: 2, online: true }), null); // a room it does not show
  people.joined("lobby", { private: false, members: [{ user: 2, name: "ana", online: false }] });
  assert.equal(people.presence({ room: "lobby", user: 2, online: true }), "changed");
  assert.equal(people.get("lobby").members.get(2).online, true);
  assert.equal(people.presence({ room: "lobby", user: 3, online: true }), "unknown");
  assert.equal(people.posted("lobby", 3), true); // a sender it does not list: ask again
  people.membersPage("lobby", [{ user: 3, name: "bob", online: true }]);
  assert.deepEqual([...people.get("lobby").members.keys()], [3]);
});

test("only a private room's owner invites, and never in a direct room", () => {
  const people = new People(ME);
  people.joined("club", { private: true, owner: ME, members: [] });
  people.joined("open", { private: false, owner: ME, members: [] });
  people.joined("theirs", { private: true, owner: 2, members: [] });
  people.describe("dm", { private: true, with: { id: 2, name: "ana" } });
  people.joined("dm", { private: true, owner: ME, members: [] });
  assert.deepEqual(
    ["club", "open", "theirs", "dm", "none"].map((slug) => people.invites(slug)),
    [true, false, false, false, false],
  );
});

test("the invitations are exactly those rooms.list lists, each answered once at a time", () => {
  const invitations = new Invitations();
  invitations.listed([
    { room: "club", invited: true, by: { id: 2, name: "ana" } },
    { room: "lobby", invited: false },
    { room: "dm-1-2", invited: true, with: { id: 2, name: "ana" } },
  ]);
  assert.deepEqual([...invitations.entries.keys()], ["club", "dm-1-2"]);
  assert.equal(invitations.answering("club"), true);
  assert.equal(invitations.answering("club"), false); // a second click waits for the first answer
  invitations.refused("club", "Not joined: gone");
  assert.equal(invitations.get("club").answering, false);
  assert.equal(invitations.get("club").note, "Not joined: gone");
  invitations.refused("club"); // lost: the note stays
  assert.equal(invitations.get("club").note, "Not joined: gone");
  invitations.listed([{ room: "club", invited: true, by: { id: 2, name: "ana" } }]); // dm-1-2 withdrawn
  assert.deepEqual([...invitations.entries.keys()], ["club"]);
  assert.equal(invitations.get("club").note, "Not joined: gone"); // kept as it was
  assert.equal(invitations.drop("club"), true);
  assert.equal(invitations.answering("club"), false);
  assert.equal(invitationText({ room: "club", by: { name: "ana" } }), "# club, from ana");
  assert.equal(invitationText({ room: "club" }), "# club");
  assert.equal(invitationText({ room: "dm-1-2", with: { name: "ana" } }), "ana wants to message you");
});

test("members of another deployment keep their node (federation); ours have none to show", () => {
  const people = new People(ME);
  people.joined("lobby@a", {
    private: false,
    members: [
      { user: 2, name: "ana", node: "a", online: true },
      { user: ME, name: "me", node: "b", online: true },
      { user: 4, name: "cy", online: false },
    ],
  });
  const members = people.get("lobby@a").members;
  assert.deepEqual([members.get(2).node, members.get(ME).node, members.get(4).node], ["a", "b", null]);
  people.membersPage("lobby@a", [{ user: 5, name: "dee", node: "a", online: false }]);
  assert.equal(people.get("lobby@a").members.get(5).node, "a");
});
