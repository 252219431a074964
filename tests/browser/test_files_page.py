"""Files and search on the chat page (PROTOCOL.md 1.2, "Page hooks"), in Chromium against live daphne.

A file picked in the composer (`[data-testid=attach]`) is uploaded with a
progress bar and posted as a message of its own: every member sees it, an
image as an `img`, anything else as a link. Its key is kept with the file
in the browser, so a reload while its answer was lost sends the same key
and the server's one upload is posted once. A search (`[data-testid=search-input]`,
Enter) lists its results, and one opens its room at the message, from
older pages where it is not loaded; a search made while the page is offline
waits for the connection and goes out once it is back.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from messaging.files.models import Upload
from messaging.models import Message

from ..support.archives import archive
from ..support.uploads import PDF, PNG_PIXEL
from .conftest import join, poll, sign_in, write

pytestmark = [pytest.mark.e2e]

CAT = {"name": "cat.png", "mimeType": "image/png", "buffer": PNG_PIXEL}
NOTES = {"name": "notes from the meeting.pdf", "mimeType": "application/pdf", "buffer": PDF}


def attachment(page, name: str):
    return page.locator(f"[data-testid=attachment][data-name='{name}']")


def messages_with_files(room: str) -> list[list[str]]:
    rows = Message.objects.filter(room__slug=room, attachments__isnull=False).order_by("seq")
    return [[file["name"] for file in row.attachments] for row in rows]


def test_picked_files_are_uploaded_and_posted_once_for_every_member(server, new_context):
    ana = sign_in(new_context(), server.url, "Ana")
    bob = sign_in(new_context(), server.url, "Bob")
    join(ana, "files")
    join(bob, "files")
    # The uploads' answers held back a moment: each file's line and progress bar shows meanwhile.
    held = []
    ana.route("**/api/uploads", lambda route: held.append(route))
    ana.locator("[data-testid=attach]").set_input_files([CAT, NOTES])
    lines = ana.locator("[data-testid=upload]")
    expect(lines).to_have_count(2)
    expect(lines.first.locator("progress[data-testid=upload-progress]")).to_have_count(1)
    poll(ana, lambda: len(held) == 2, "both uploads on their way")
    for route in held:
        route.continue_()
    expect(lines).to_have_count(0)
    for page in (ana, bob):
        expect(attachment(page, "cat.png").locator("img")).to_be_visible()
        expect(attachment(page, NOTES["name"]).locator("a[href^='/api/uploads/']")).to_have_text(re.compile("notes"))
    # The image is served to a member: the browser drew it.
    poll(bob, lambda: attachment(bob, "cat.png").locator("img").evaluate("i => i.naturalWidth") == 1, "the image")
    assert sorted(messages_with_files("files")) == [["cat.png"], [NOTES["name"]]]
    assert Upload.objects.filter(room__slug="files").count() == 2


def test_a_reload_after_a_lost_answer_sends_the_same_key_and_posts_the_file_once(server, new_context):
    ana = sign_in(new_context(), server.url, "Ana")
    join(ana, "files")
    write(ana, "before the file")
    expect(ana.locator("[data-msg-id][data-state=sent]")).to_have_count(1)
    keys, sent, reloaded = [], [], []

    def uploads(route):
        key = route.request.headers["idempotency-key"]
        if reloaded:
            sent.append(key)
            route.continue_()
            return
        # The server stores the file; its answer never reaches the page, nor does any retry before the reload.
        keys.append(key)
        if len(keys) == 1:
            route.fetch()
        route.abort()

    ana.route("**/api/uploads", uploads)
    ana.locator("[data-testid=attach]").set_input_files([CAT])
    poll(ana, lambda: keys, "the upload sent")
    poll(ana, lambda: Upload.objects.count() == 1, "the upload stored")
    # Reloaded before any retry got through: the file is still the browser's, with its key.
    ana.once("framenavigated", lambda frame: reloaded.append(frame))
    ana.reload()
    expect(attachment(ana, "cat.png").locator("img")).to_be_visible()
    assert set(keys) == {keys[0]}, "every retry before the reload kept the key"
    assert sent and set(sent) == {keys[0]}, "the reload sent the file again with its key"
    expect(ana.locator("[data-testid=upload]")).to_have_count(0)
    ana.wait_for_timeout(1500)
    assert messages_with_files("files") == [["cat.png"]], "one post"
    assert Upload.objects.count() == 1, "one upload"


def test_a_search_lists_the_users_messages_and_opens_one_in_its_room(server, new_context):
    ana = sign_in(new_context(), server.url, "Ana")
    user = get_user_model().objects.get(first_name="Ana")
    archive("archive", user, ["the needle we want" if n == 12 else f"old {n}" for n in range(1, 131)])
    archive("other", user, ["another needle here"])
    archive("secret", None, ["a needle not for ana"])
    search = ana.locator("[data-testid=search-input]")
    search.fill("NEEDLE")
    search.press("Enter")
    results = ana.locator("[data-testid=search-results] [data-testid=search-result]")
    expect(results).to_have_count(2)
    assert sorted((r.get_attribute("data-room"), r.get_attribute("data-seq")) for r in results.all()) == [
        ("archive", "12"),
        ("other", "1"),
    ]
    ana.locator("[data-testid=search-result][data-room=archive]").click()
    expect(ana.locator("#room-title")).to_have_text("# archive")
    # Older than the 50 the join brings: the page goes back for it, and shows it.
    found = ana.locator("[data-msg-id][data-seq='12']")
    expect(found).to_be_visible()
    expect(found).to_have_class(re.compile(r"\bfound\b"))
    expect(found).to_be_in_viewport()


def test_a_search_made_offline_goes_out_once_the_page_is_back_and_escape_drops_it(server, new_context):
    context = new_context()
    ana = sign_in(context, server.url, "Ana")
    archive("other", get_user_model().objects.get(first_name="Ana"), ["a needle here", "hay"])
    conn = ana.locator("[data-testid=conn]")
    search = ana.locator("[data-testid=search-input]")
    note = ana.locator("[data-testid=search-note]")
    results = ana.locator("[data-testid=search-results] [data-testid=search-result]")

    context.set_offline(True)
    expect(conn).to_have_attribute("data-state", "offline")
    search.fill("needle")
    search.press("Enter")
    expect(note).to_have_text("Waiting for the connection…")
    context.set_offline(False)
    expect(results).to_have_count(1)
    expect(note).to_be_hidden()

    # Cleared while it waits: nothing comes back once the page reconnects.
    context.set_offline(True)
    expect(conn).to_have_attribute("data-state", "offline")
    search.fill("hay")
    search.press("Enter")
    expect(note).to_have_text("Waiting for the connection…")
    search.press("Escape")
    context.set_offline(False)
    expect(conn).to_have_attribute("data-state", "open")
    ana.wait_for_timeout(1000)
    expect(results).to_have_count(0)
    expect(note).to_be_hidden()
