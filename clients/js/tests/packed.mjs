// The package as its users get it, for the tests: `npm pack` of clients/js (whose prepack copies
// the chat page's outbox.js in), the tarball installed into a scratch folder, and
// `messaging-outbox` imported by name from there, through the package's own `exports`.
// Once per test process (node --test runs each file in its own); the folder goes with it.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const packageFolder = fileURLToPath(new URL("..", import.meta.url));
export const pageModule = fileURLToPath(
  new URL("../../../messaging/contrib/chat/static/messaging/outbox.js", import.meta.url),
);

const env = { ...process.env, npm_config_update_notifier: "false", npm_config_fund: "false", npm_config_audit: "false" };

function npm(args, cwd) {
  return execFileSync("npm", args, { cwd, env, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

const scratch = mkdtempSync(join(tmpdir(), "messaging-outbox-"));
process.on("exit", () => rmSync(scratch, { recursive: true, force: true }));

/** npm's account of the tarball it packed: name, version, filename, files. */
export const packed = JSON.parse(npm(["pack", "--json", "--pack-destination", scratch], packageFolder))[0];
export const tarball = join(scratch, packed.filename);

const project = join(scratch, "project");
mkdirSync(project);
writeFileSync(join(project, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }));
// The tarball has no dependencies: nothing is fetched.
npm(["install", "--offline", "--ignore-scripts", tarball], project);
writeFileSync(join(project, "entry.mjs"), 'export * from "messaging-outbox";\n');

/** Where npm installed the package. */
export const installed = join(project, "node_modules", "messaging-outbox");

/** The package's module, imported by its name from the scratch project. */
export function importPackage() {
  return import(pathToFileURL(join(project, "entry.mjs")).href);
}
