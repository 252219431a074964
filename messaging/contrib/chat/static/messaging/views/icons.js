// The state icons of a message: 20x16 line icons drawn as SVG paths.
const SVG = "http://www.w3.org/2000/svg";

// A clock, one tick, two ticks, an exclamation mark.
const ICONS = {
  sending: ["M10 1.5a6.5 6.5 0 1 0 0 13 6.5 6.5 0 0 0 0-13Z", "M10 4.5V8l2.5 1.5"],
  sent: ["M4.5 8.5l3.5 3.5L15.5 4.5"],
  delivered: ["M1 8.5l3.5 3.5L12 4.5", "M8 11l1 1L16.5 4.5"],
  read: ["M1 8.5l3.5 3.5L12 4.5", "M8 11l1 1L16.5 4.5"],
  failed: ["M10 1.5a6.5 6.5 0 1 0 0 13 6.5 6.5 0 0 0 0-13Z", "M10 4.5v4", "M10 11v.5"],
};

export const STATE_LABEL = { sending: "Sending", sent: "Sent", delivered: "Delivered", read: "Read", failed: "Failed" };

export function icon(state) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 20 16");
  svg.setAttribute("aria-hidden", "true");
  for (const d of ICONS[state]) {
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", d);
    svg.append(path);
  }
  return svg;
}
