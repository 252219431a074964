// The outbox as an npm package (messaging/contrib/chat/static/messaging/package.json): what it
// ships, and that its TypeScript types declare what the module exports.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const folder = join(dirname(fileURLToPath(import.meta.url)), "../../messaging/contrib/chat/static/messaging");
const manifest = JSON.parse(readFileSync(join(folder, "package.json"), "utf8"));

test("the package's entry points are the page's module and its types", async () => {
  assert.equal(manifest.type, "module");
  assert.equal(manifest.exports["."].import, "./outbox.js");
  assert.equal(manifest.exports["."].types, "./outbox.d.ts");
  assert.equal(manifest.main, "./outbox.js");
  assert.equal(manifest.types, "./outbox.d.ts");
  const module = await import(join(folder, manifest.exports["."].import));
  assert.equal(typeof module.Outbox, "function");
});

test("every export of outbox.js is declared in outbox.d.ts, and nothing else", async () => {
  const module = await import(join(folder, "outbox.js"));
  const declared = [...readFileSync(join(folder, "outbox.d.ts"), "utf8")
    .matchAll(/^export declare (?:const|function|class) (\w+)/gm)].map((m) => m[1]);
  assert.deepEqual(declared.sort(), Object.keys(module).sort());
});

test("npm pack ships the module, its types and README, and nothing of the page", () => {
  const [packed] = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"],
    { cwd: folder, encoding: "utf8", env: { ...process.env, npm_config_update_notifier: "false" } }));
  assert.equal(packed.name, "messaging-outbox");
  assert.deepEqual(packed.files.map((f) => f.path).sort(), ["README.md", "outbox.d.ts", "outbox.js", "package.json"]);
});

test("the package's version is the app's", () => {
  const init = readFileSync(join(folder, "../../../../__init__.py"), "utf8");
  assert.equal(manifest.version, /__version__ = "([^"]+)"/.exec(init)[1]);
});
