// The npm package `messaging-outbox` (clients/js), packed and installed as its users get it
// (packed.mjs): what it ships, how it is imported, its types, licence and version, and that its
// module is the chat page's own file.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { importPackage, installed, packageFolder, packed, pageModule } from "./packed.mjs";

const manifest = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"));

test("the tarball ships the module, its types, README and licence, and nothing of the page", () => {
  assert.equal(packed.name, "messaging-outbox");
  assert.deepEqual(packed.files.map((f) => f.path).sort(),
    ["LICENSE", "README.md", "outbox.d.ts", "outbox.js", "package.json"]);
});

test("the package's module is the chat page's own outbox.js, byte for byte", () => {
  assert.ok(readFileSync(join(installed, "outbox.js")).equals(readFileSync(pageModule)));
});

test("the package imports by its name, through its exports, as the module and its types", async () => {
  assert.equal(manifest.type, "module");
  assert.deepEqual(manifest.exports["."], { types: "./outbox.d.ts", import: "./outbox.js" });
  assert.equal(manifest.main, "./outbox.js");
  assert.equal(manifest.types, "./outbox.d.ts");
  const module = await importPackage();
  assert.equal(typeof module.Outbox, "function");
  assert.equal(typeof module.Connection, "function");
});

test("every export of the module is declared in outbox.d.ts, and nothing else", async () => {
  const module = await importPackage();
  const declared = [...readFileSync(join(installed, "outbox.d.ts"), "utf8")
    .matchAll(/^export declare (?:const|function|class) (\w+)/gm)].map((m) => m[1]);
  assert.deepEqual(declared.sort(), Object.keys(module).sort());
});

test("its licence is BSD-3-Clause, and its version the Python client's: the clients are released together", () => {
  assert.equal(manifest.license, "BSD-3-Clause");
  // The repository's own licence, word for word.
  assert.ok(readFileSync(join(installed, "LICENSE")).equals(readFileSync(join(packageFolder, "../../LICENSE"))));
  const init = readFileSync(join(packageFolder, "../python/src/messaging_client/__init__.py"), "utf8");
  assert.equal(manifest.version, /__version__ = "([^"]+)"/.exec(init)[1]);
});
