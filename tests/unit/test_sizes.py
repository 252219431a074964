"""What fits in one frame (messaging/chat/sizes.py): the cheap bounds are bounds, the count is exact,
and settings under which one message cannot fit are refused."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import orjson
import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured

from messaging.chat.commands import member_entry
from messaging.chat.messages import stored_msg_frame
from messaging.chat.sizes import (
    FULLEST_FILE,
    FULLEST_MEMBER,
    FULLEST_MESSAGE,
    check_one_message_fits,
    fitting,
    longest_page_of_one,
    member_bytes_at_most,
    message_bytes_at_most,
)
from messaging.conf import MessagingSettings
from messaging.core.protocol import ack_ok, encode
from messaging.models import Membership, Message

AT = datetime(2026, 11, 29, 18, 0, tzinfo=UTC)
# Each the costliest of its kind in JSON: a control character (6 bytes), a
# quote and a backslash (2), a character of three bytes, one of four.
TEXTS = {
    "plain": "hello",
    "control": "\x01" * 4000,
    "escapes": '"\\' * 2000,
    "bmp": "€" * 4000,
    "astral": "😀" * 4000,
    "mixed": 'a\x1f"\u2028😀\n' * 600,
}


# The most files a message holds, each with the longest name and type, of the costliest characters.
FILES = [
    {"upload": str(uuid.UUID(int=n)), "name": "\x01" * 255, "size": 2**63 - 1, "content_type": "\x01" * 100}
    for n in range(10)
]


def user(name: str, pk=7):
    return get_user_model()(pk=pk, username="u", first_name=name, last_name=name)


def stored(body: str, sender, **fields) -> Message:
    return Message(
        seq=2**63 - 1,
        client_msg_id="c" * 64,
        sender=sender,
        body=body,
        sent_at=AT,
        rev=2**63 - 1,
        posted_rev=1,
        version=2**31,
        state="delivered",
        **fields,
    )


def json_bytes(value) -> int:
    return len(encode(value).encode())


@pytest.mark.parametrize("kind", sorted(TEXTS))
@pytest.mark.parametrize("change", ["none", "edited", "deleted", "files"])
@pytest.mark.parametrize("own", [True, False], ids=["own", "others"])
def test_a_stored_messages_bound_holds_its_bytes(kind, change, own):
    text = TEXTS[kind]
    sender = user(text[:150])
    fields = (
        {"edited_at": AT}
        if change == "edited"
        else {"deleted_at": AT, "edited_at": AT}
        if change == "deleted"
        else {"attachments": FILES}
        if change == "files"
        else {}
    )
    d = stored_msg_frame(stored(text, sender, **fields), "r" * 64, sender if own else user("x", pk=8))["d"]
    assert set(d) - {"attachments"} <= set(FULLEST_MESSAGE), "a key the bound does not know"
    assert all(set(f) == set(FULLEST_FILE) for f in d.get("attachments", ())), "a file's key the bound does not know"
    assert message_bytes_at_most(d) >= json_bytes(d)


def test_a_bound_holds_for_a_uuid_sender():
    sender = user("\x01" * 150, pk=uuid.uuid4())
    d = stored_msg_frame(stored("\x01", sender), "lobby", sender)["d"]
    assert message_bytes_at_most(d) >= json_bytes(d)


@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_a_member_entrys_bound_holds_its_bytes_with_online(kind):
    entry = member_entry(
        Membership(user=user(TEXTS[kind][:150]), delivered=2**63 - 1, read=2**63 - 1, joined_seq=2**63 - 1)
    )
    assert set(entry) | {"online"} <= set(FULLEST_MEMBER), "a key the bound does not know"
    assert member_bytes_at_most(entry) >= json_bytes({**entry, "online": False})


def test_fitting_keeps_exactly_what_fits_and_encodes_nothing_when_the_bounds_fit():
    entries = [{"text": "\x01" * n} for n in (10, 500, 20, 300, 40)]
    exact = [json_bytes(e) for e in entries]

    def never(entry):
        raise AssertionError("bounded, not encoded")

    assert fitting(entries, lambda e: 6 * len(e["text"]) + 20, budget=10**6) == 5
    for budget in range(0, sum(exact) + 10, 37):
        n = fitting(entries, lambda e: 6 * len(e["text"]) + 20, budget)
        assert json_bytes(entries[:n]) - 2 <= budget or n == 0, "what it keeps fits, brackets aside"
        if n < len(entries):
            assert json_bytes(entries[: n + 1]) - 2 > budget, "and one more would not"
    # Where the bounds fit, nothing is encoded.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("messaging.chat.sizes.encoded_bytes", never)
        assert fitting(entries, lambda e: 10**4, budget=10**5) == 5


def test_the_longest_page_of_one_message_is_a_bound_of_its_ack():
    conf = MessagingSettings()
    sender = user("\x01" * 150, pk=2**63 - 1)
    d = stored_msg_frame(
        stored("\x01" * conf.BODY_MAX_CHARS, sender, edited_at=AT, attachments=FILES), "r" * 64, sender
    )["d"]
    ack = ack_ok("i" * 64, {"room": "r" * 64, "messages": [d], "more": True})
    assert json_bytes(ack) <= longest_page_of_one(conf) < conf.largest_frame
    assert len(orjson.dumps(ack)) > 24_000, "the worst message of the defaults: some 24 KB"


@pytest.mark.parametrize(
    "options", [{"BODY_MAX_CHARS": 200_000}, {"MAX_SEND_BUFFER": 20_000}], ids=["long-messages", "small-frames"]
)
def test_settings_under_which_one_message_cannot_fit_are_refused(options):
    with pytest.raises(ImproperlyConfigured, match="BODY_MAX_CHARS.*MAX_SEND_BUFFER"):
        check_one_message_fits(MessagingSettings(**options))
    check_one_message_fits(MessagingSettings())
    check_one_message_fits(MessagingSettings(BODY_MAX_CHARS=100_000))
