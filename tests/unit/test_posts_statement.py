"""The posts' statement in its two forms: a batch without files runs it without the files' parts
(messaging/chat/attachments.py), which a batch with files gets whole."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from messaging.chat.posts import Post, posts_statement
from messaging.core.handlers import CommandContext

FILES_PARTS = ("attached AS", "held AS", "declined AS", "attach AS", "SELECT a.kept", "'attachments', a.shown")


def entries(files: tuple[str, ...] = ()) -> list:
    user = get_user_model()(pk=7, first_name="ana")
    return [(CommandContext(user=user, command_id="c1", type="room.post"), Post("lobby", "hi", files), "f")]


def test_a_batch_without_files_runs_the_statement_without_their_parts():
    plain, params = posts_statement(entries())
    assert [part for part in FILES_PARTS if part in plain] == []
    assert "-- files" not in plain and "{files" not in plain
    assert params["attachments"] == "[]"


def test_a_batch_with_files_runs_it_whole_and_without_the_markers():
    whole, _ = posts_statement(entries(("0190a3f2-0000-7000-8000-000000000000",)), "[[1, [], []]]")
    assert [part for part in FILES_PARTS if part not in whole] == []
    assert "-- files" not in whole and "{files" not in whole
