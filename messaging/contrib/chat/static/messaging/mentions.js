// The mentions badge: how many unread mentions the user has (GET /mentions),
// polled while the page is open; a click marks them read (POST /mentions/read).
// Standalone: it imports nothing and touches only its own two elements.
const POLL_MS = 15000;

const badge = document.querySelector('[data-testid="mentions-badge"]');
const count = document.querySelector('[data-testid="mentions-count"]');

function csrfToken() {
  const field = document.querySelector('input[name="csrfmiddlewaretoken"]');
  return field ? field.value : "";
}

function show(unread, mentions) {
  count.textContent = String(unread);
  badge.hidden = unread === 0;
  badge.title = mentions.map((m) => `${m.sender} in ${m.room}: ${m.body}`).join("\n");
}

async function refresh() {
  try {
    const response = await fetch("/mentions", { credentials: "same-origin" });
    if (response.ok) {
      const { unread, mentions } = await response.json();
      show(unread, mentions);
    }
  } catch {
    // Offline: the next poll tries again.
  }
}

if (badge && count) {
  badge.addEventListener("click", async () => {
    const response = await fetch("/mentions/read", {
      method: "POST", credentials: "same-origin", headers: { "X-CSRFToken": csrfToken() },
    });
    if (response.ok) show(0, []);
  });
  refresh();
  setInterval(refresh, POLL_MS);
}
