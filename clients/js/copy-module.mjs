// The package's module is the chat page's own outbox.js, which the Django app serves as
// /static/messaging/outbox.js: `npm pack` and `npm publish` (prepack) copy it here, so the
// page and the package ship the same bytes from one file. The copy is not kept in git.
import { copyFileSync, renameSync } from "node:fs";

const source = new URL("../../messaging/contrib/chat/static/messaging/outbox.js", import.meta.url);
const copy = new URL("./outbox.js", import.meta.url);
// Whole or not at all: two packs at once (the tests') never read half a file.
const partial = new URL(`./outbox.js.${process.pid}.tmp`, import.meta.url);
copyFileSync(source, partial);
renameSync(partial, copy);
