// A message's files, under its body: each a `[data-testid=attachment]`
// (`data-name`) holding a link to its `url` (`a[href]`); an image shows as
// an `img` in its link. User text (the name) only through textContent.
import { el } from "./dom.js";
import { shownInline, sizeText } from "../model/files.js";

export class FilesView {
  constructor() {
    this.node = el("div", "files");
    this.node.hidden = true;
    this.shown = "";
  }

  /** Draw `files` (`[{upload, name, size, content_type, url}]`); nothing if they are what is shown. */
  draw(files) {
    const key = files.map((file) => `${file.upload}:${file.url}`).join(",");
    if (key === this.shown) return;
    this.shown = key;
    this.node.replaceChildren(...files.map(fileNode));
    this.node.hidden = files.length === 0;
  }
}

function fileNode(file) {
  const item = el("div", "file");
  item.dataset.testid = "attachment";
  item.dataset.name = file.name;
  const link = el("a");
  link.href = file.url;
  link.target = "_blank";
  link.rel = "noopener";
  if (shownInline(file)) {
    const image = el("img");
    image.src = file.url;
    image.alt = file.name;
    image.loading = "lazy";
    link.append(image);
  } else {
    link.append(el("span", "file-name", file.name), el("span", "file-size", sizeText(file.size)));
    link.download = file.name;
  }
  item.append(link);
  return item;
}
