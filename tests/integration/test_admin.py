"""The Django admin inspects rooms, messages and command records; it changes nothing."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from messaging.core.protocol import format_time
from messaging.models import CommandRecord, Membership, Message, Room, WatermarkMove

from .conftest import apply_command

# Commands run through the pipeline, whose database work is on its own connections: committed data.
pytestmark = [pytest.mark.django_db(transaction=True)]

MESSAGES = reverse("admin:messaging_message_changelist")
ROOMS = reverse("admin:messaging_room_changelist")
RECORDS = reverse("admin:messaging_commandrecord_changelist")


@pytest.fixture
def staff(client, django_user_model):
    """A staff user who may view the app's models, and nothing more."""
    user = django_user_model.objects.create_user(username="operator", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="messaging", codename__startswith="view_")
    )
    client.force_login(user)
    return client


@pytest.fixture
def people(django_user_model):
    return {n: django_user_model.objects.create_user(username=n, first_name=n) for n in ("ana", "bob", "cat")}


def post(user, room: str, body: str, id: str | None = None) -> int:
    return apply_command(user, "room.post", {"room": room, "body": body}, id=id).data["seq"]


@pytest.fixture
def late_joiner(people):
    """ana and bob in the lobby; ana posts 1 and 2, cat joins, ana posts 3; bob delivers and reads 1-3, cat delivers 3."""
    ana, bob, cat = people["ana"], people["bob"], people["cat"]
    for user in (ana, bob):
        apply_command(user, "room.join", {"room": "lobby"})
    post(ana, "lobby", "first", id="c-1")
    post(ana, "lobby", "second", id="c-2")
    apply_command(cat, "room.join", {"room": "lobby"})
    post(ana, "lobby", "third", id="c-3")
    apply_command(bob, "receipt", {"room": "lobby", "read": 3})
    apply_command(cat, "receipt", {"room": "lobby", "delivered": 3})
    return {m.seq: m for m in Message.objects.filter(room__slug="lobby")}


def listed(response) -> list:
    assert response.status_code == 200, response.status_code
    return list(response.context["cl"].result_list)


def list_rows(html: str) -> list[dict[str, str]]:
    """Each row of a change list as {column: text}."""
    # A row may begin with the moderator's action checkbox, which is no column.
    rows = re.findall(r"<tr>(.*?)</tr>", re.search(r"<tbody>(.*?)</tbody>", html, re.S).group(1), re.S)
    cell = r'<t[hd] class="field-([a-z_]+)[^"]*">(.*?)</t[hd]>'
    return [{name: re.sub(r"<[^>]+>", "", text) for name, text in re.findall(cell, row, re.S)} for row in rows]


def test_message_list_shows_every_column(staff, late_joiner):
    response = staff.get(MESSAGES)
    assert [(m.seq, m.state) for m in listed(response)] == [(3, "delivered"), (2, "read"), (1, "read")]
    rows = list_rows(response.content.decode())
    assert [(r["room"], r["seq"], r["sender"], r["client_msg_id"], r["state"]) for r in rows] == [
        ("lobby", "3", "ana", "c-3", "Delivered"),
        ("lobby", "2", "ana", "c-2", "Read"),
        ("lobby", "1", "ana", "c-1", "Read"),
    ]
    assert [r["read_at"] == "-" for r in rows] == [True, False, False]
    assert all(r["sent_at"] not in ("", "-") and r["delivered_at"] not in ("", "-") for r in rows)


def test_message_list_filters_and_search(staff, late_joiner, people, django_user_model):
    lobby = Room.objects.get(slug="lobby")
    apply_command(people["bob"], "room.post", {"room": "lobby", "body": "from bob"}, id="bob-1")
    apply_command(people["cat"], "room.join", {"room": "other"})
    post(people["cat"], "other", "elsewhere", id="cat-1")

    def seqs(query: str) -> set[tuple[str, int]]:
        return {(m.room.slug, m.seq) for m in listed(staff.get(MESSAGES + query))}

    assert seqs("?state__exact=read") == {("lobby", 1), ("lobby", 2)}
    assert seqs("?state__exact=sent") == {("lobby", 4), ("other", 1)}
    assert seqs(f"?room__id__exact={lobby.pk}") == {("lobby", s) for s in (1, 2, 3, 4)}
    assert seqs(f"?sender__id__exact={people['bob'].pk}") == {("lobby", 4)}
    assert seqs("?q=c-2") == {("lobby", 2)}
    assert seqs("?q=elsewhere") == {("other", 1)}
    sent = Message.objects.get(client_msg_id="c-1").sent_at
    assert len(seqs(f"?sent_at__year={sent.year}&sent_at__month={sent.month}&sent_at__day={sent.day}")) == 5
    assert seqs(f"?sent_at__year={sent.year - 1}") == set()
    long_ago = "2000-01-01 00:00:00+00:00"
    assert len(seqs("?" + urlencode({"sent_at__gte": long_ago}))) == 5
    assert seqs("?" + urlencode({"sent_at__lt": long_ago})) == set()
    # The sender filter offers only users who posted, not every account.
    html = staff.get(MESSAGES).content.decode()
    for user in people.values():
        assert f"sender__id__exact={user.pk}" in html
    operator = django_user_model.objects.get(username="operator")
    assert f"sender__id__exact={operator.pk}" not in html


def recipient_rows(html: str) -> dict[str, list[str]]:
    table = re.search(r"<th>recipient</th>.*?<tbody>(.*?)</tbody>", html, re.S).group(1)
    return {
        cells[0]: cells[1:]
        for cells in (re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", table))
    }


def first_reached(user, watermark: str, seq: int):
    move = WatermarkMove.objects.filter(membership__user=user, **{f"{watermark}__gte": seq}).order_by(watermark).first()
    return format_time(move.at)


def test_message_page_shows_each_recipient_and_the_stored_ack(staff, late_joiner, people):
    third = late_joiner[3]
    html = staff.get(reverse("admin:messaging_message_change", args=[third.pk])).content.decode()
    rows = recipient_rows(html)
    assert set(rows) == {"bob", "cat"}
    assert rows["bob"][1:] == [first_reached(people["bob"], "delivered", 3), first_reached(people["bob"], "read", 3)]
    assert rows["cat"][1:] == [first_reached(people["cat"], "delivered", 3), "no"]
    # cat's receipt completed the message: its delivery time is the message's.
    assert f"{format_time(third.sent_at)} / {rows['cat'][1]} / -" in html
    record = CommandRecord.objects.get(user=people["ana"], command_id="c-3")
    assert "&quot;seq&quot;: 3" in html and "&quot;room&quot;: &quot;lobby&quot;" in html
    assert reverse("admin:messaging_commandrecord_change", args=[record.pk]) in html

    first = staff.get(reverse("admin:messaging_message_change", args=[late_joiner[1].pk])).content.decode()
    assert set(recipient_rows(first)) == {"bob"}, "cat joined after 1 was posted"


def test_a_watermark_without_recorded_moves_shows_no_invented_time(staff, late_joiner, people):
    # As a membership moved before moves were recorded would look.
    WatermarkMove.objects.filter(membership__user=people["cat"]).delete()
    html = staff.get(reverse("admin:messaging_message_change", args=[late_joiner[3].pk])).content.decode()
    assert recipient_rows(html)["cat"][1:] == ["yes (time not recorded)", "no"]


def test_a_message_nobody_else_could_receive_says_so(staff, people):
    apply_command(people["ana"], "room.join", {"room": "alone"})
    post(people["ana"], "alone", "echo")
    message = Message.objects.get(room__slug="alone")
    html = staff.get(reverse("admin:messaging_message_change", args=[message.pk])).content.decode()
    assert "none: nobody else had joined the room when it was posted" in html


def test_room_page_lists_members_with_watermarks(staff, late_joiner, people):
    lobby = Room.objects.get(slug="lobby")
    assert [(r.slug, r.last_seq, r.members) for r in listed(staff.get(ROOMS))] == [("lobby", 3, 3)]
    html = staff.get(reverse("admin:messaging_room_change", args=[lobby.pk])).content.decode()
    members = [
        (m.user.username, m.joined_seq, m.delivered, m.read)
        for m in Membership.objects.filter(room=lobby).select_related("user").order_by("joined_at", "pk")
    ]
    assert members == [("ana", 0, 0, 0), ("bob", 0, 3, 3), ("cat", 2, 3, 0)]
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r'<td class="field-[a-z_]+">(.*?)</td>', html, re.S)]
    assert all(username in html for username, *_ in members)
    assert cells[1::6] == ["0", "0", "2"] and cells[3::6] == ["0", "3", "3"] and cells[4::6] == ["0", "3", "0"]


def test_command_records_show_the_stored_ack_and_fingerprint(staff, late_joiner, people):
    records = listed(staff.get(RECORDS))
    assert [r.command_id for r in records] == ["c-3", "c-2", "c-1"], "only exactly-once commands are recorded"
    record = records[0]
    html = staff.get(reverse("admin:messaging_commandrecord_change", args=[record.pk])).content.decode()
    assert record.fingerprint in html and "&quot;seq&quot;: 3" in html
    assert [r.command_id for r in listed(staff.get(RECORDS + "?q=c-2"))] == ["c-2"]
    assert len(listed(staff.get(RECORDS + "?type__exact=room.post"))) == 3


def test_the_admin_cannot_add_change_or_delete(staff, late_joiner):
    message = late_joiner[1]
    page = staff.get(reverse("admin:messaging_message_change", args=[message.pk])).content.decode()
    assert 'name="_save"' not in page and "deletelink" not in page
    assert "addlink" not in staff.get(MESSAGES).content.decode()
    # The one action is the moderator's delete, a tombstone (test_moderation_admin.py): no bulk delete of rows.
    assert 'value="delete_selected"' not in staff.get(MESSAGES).content.decode(), "no bulk delete"
    for name in ("message", "room", "commandrecord"):
        assert staff.get(reverse(f"admin:messaging_{name}_add")).status_code == 403
    change = reverse("admin:messaging_message_change", args=[message.pk])
    assert staff.post(change, {"body": "rewritten", "state": "sent"}).status_code == 403
    assert staff.post(reverse("admin:messaging_message_delete", args=[message.pk]), {"post": "yes"}).status_code == 403
    message.refresh_from_db()
    assert (message.body, message.state) == ("first", "read")


def populate(django_user_model, count: int, tag: str) -> None:
    """`count` messages from count/10 senders over count/20 rooms; half the senders read everything."""
    senders = [django_user_model.objects.create_user(username=f"{tag}-{i}") for i in range(max(2, count // 10))]
    rooms = [f"{tag}-{i}" for i in range(max(2, count // 20))]
    for i in range(count):
        user, room = senders[i % len(senders)], rooms[i % len(rooms)]
        apply_command(user, "room.join", {"room": room})
        apply_command(user, "room.post", {"room": room, "body": f"body {i}"})
    for membership in Membership.objects.filter(user__in=senders[::2]).select_related("room", "user"):
        apply_command(membership.user, "receipt", {"room": membership.room.slug, "read": membership.room.last_seq})


def query_counts(client) -> dict[str, int]:
    busiest = Room.objects.order_by("-last_seq").first()
    last = Message.objects.filter(room=busiest).order_by("-seq").first()
    pages = {
        "messages": MESSAGES,
        "messages filtered": MESSAGES + "?state__exact=read&q=body",
        "messages by day": MESSAGES + f"?sent_at__year={last.sent_at.year}",
        "rooms": ROOMS,
        "command records": RECORDS,
        "room page": reverse("admin:messaging_room_change", args=[busiest.pk]),
        "message page": reverse("admin:messaging_message_change", args=[last.pk]),
        "command record page": reverse("admin:messaging_commandrecord_change", args=[CommandRecord.objects.last().pk]),
    }
    counts = {}
    for name, url in pages.items():
        # Cold, like the first request of a process: the cache's content type
        # lookups would otherwise count or not depending on the tests before.
        ContentType.objects.clear_cache()
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200, name
        counts[name] = len(queries)
    return counts


def test_pages_run_a_bounded_number_of_queries_however_many_rows(staff, django_user_model):
    populate(django_user_model, 10, "few")
    few = query_counts(staff)
    populate(django_user_model, 190, "many")
    assert Message.objects.count() == 200
    many = query_counts(staff)
    assert many == few, (few, many)
    assert max(many.values()) <= 12, many


def test_a_message_shows_its_versions_and_a_tombstone_as_such(staff, people, settings):
    ana = people["ana"]
    apply_command(ana, "room.join", {"room": "lobby"})
    seq = post(ana, "lobby", "first draft")
    settings.MESSAGING = {**settings.MESSAGING, "EDIT_HISTORY_RETENTION": 3600}
    apply_command(ana, "message.edit", {"room": "lobby", "seq": seq, "body": "second draft"})
    message = Message.objects.get(room__slug="lobby", seq=seq)
    page = staff.get(reverse("admin:messaging_message_change", args=[message.pk])).content.decode()
    assert "second draft" in page and "first draft" in page and "edit" in page
    apply_command(ana, "message.delete", {"room": "lobby", "seq": seq})
    page = staff.get(reverse("admin:messaging_message_change", args=[message.pk])).content.decode()
    assert "(message deleted)" in page and "draft" not in page and "not kept" in page
    listing = staff.get(MESSAGES).content.decode()
    assert "(message deleted)" in listing and "draft" not in listing
