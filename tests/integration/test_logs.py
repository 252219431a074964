"""Log lines made while a command runs carry its id, type and user, in the consumer and in the database thread."""

from __future__ import annotations

import json
import logging

import pytest
from django.conf import settings

from messaging.ops.logcontext import NOT_A_STRING, CommandContextFilter, JsonFormatter

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def records(caplog):
    caplog.set_level(logging.INFO, logger="messaging")
    caplog.handler.addFilter(CommandContextFilter())
    yield caplog
    caplog.handler.filters.clear()


async def test_failure_logged_in_the_handler_thread_names_the_command_and_user(
    make_user, open_clients, records, broken_type
):
    client = await open_clients(await make_user())
    ack = await client.call("test.broken", {}, id="log-1")
    assert ack["error"]["code"] == "unavailable"
    failure = next(r for r in records.records if r.name == "messaging.core.records" and r.levelno == logging.ERROR)
    assert (failure.command_id, failure.command_type, failure.user) == ("log-1", "test.broken", client.user.pk)
    answered = next(
        r for r in records.records if r.name == "messaging.transport.consumers" and "answered" in r.getMessage()
    )
    assert answered.getMessage().startswith("answered unavailable in ")
    assert (answered.command_id, answered.user) == ("log-1", client.user.pk)

    line = json.loads(JsonFormatter().format(failure))
    assert line["command_id"] == "log-1" and line["user"] == client.user.pk and line["level"] == "ERROR"
    assert "RuntimeError: the handler broke" in line["exc"]


async def test_lines_outside_a_command_carry_no_command(make_user, open_clients, records):
    client = await open_clients(await make_user())
    await client.join("lobby")
    logging.getLogger("messaging.test").info("between commands")
    outside = next(r for r in records.records if r.getMessage() == "between commands")
    assert outside.command_id == "-" and outside.user == "-"
    assert "command_id" not in json.loads(JsonFormatter().format(outside))


async def test_a_client_chosen_type_is_logged_bounded(make_user, open_clients, records):
    client = await open_clients(await make_user())
    await client.call("x" * 500, {}, id="log-2")
    answered = next(r for r in records.records if getattr(r, "command_id", None) == "log-2")
    assert answered.command_type == "x" * 64 + "..."


# The demo project's plain format (project/settings.py).
PLAIN = logging.Formatter(settings.LOGGING["formatters"]["plain"]["format"])


async def test_a_type_with_a_newline_cannot_forge_a_log_line(make_user, open_clients, records):
    client = await open_clients(await make_user())
    forged = "room.post\n2026-12-01 09:00:00,000 ERROR messaging.transport.consumers [x y user=1] forged"
    ack = await client.call(forged, {}, id="log-3")
    assert ack["error"]["code"] == "unknown_type"
    answered = next(r for r in records.records if getattr(r, "command_id", None) == "log-3")
    line = PLAIN.format(answered)
    assert "\n" not in line and "[log-3 room.post\\n2026-12-01 09:00:00,000 ERROR " in line
    entry = json.loads(JsonFormatter().format(answered))
    assert entry["command_type"].startswith("room.post\\n2026") and entry["message"].startswith("answered")


@pytest.mark.parametrize("t", [["room.post"], {"t": "room.post"}, 7, None, True], ids=repr)
async def test_a_type_that_is_not_a_string_is_logged_as_a_marker(make_user, open_clients, records, t):
    client = await open_clients(await make_user())
    ack = await client.ack(await client.send(t, {}, id="log-4"))
    assert ack["error"] == {"code": "invalid", "message": "t must be a string", "retry": False}
    answered = next(r for r in records.records if getattr(r, "command_id", None) == "log-4")
    assert answered.command_type == NOT_A_STRING
    assert "[log-4 <not a string> user=" in PLAIN.format(answered)


async def test_a_type_with_a_lone_surrogate_is_logged_escaped_and_the_json_line_is_json(
    make_user, open_clients, records
):
    client = await open_clients(await make_user())
    await client.call("half\ud83d", {}, id="log-5")  # json.dumps escapes it, as JSON.stringify does
    answered = next(r for r in records.records if getattr(r, "command_id", None) == "log-5")
    assert answered.command_type == "half\\ud83d"
    assert json.loads(JsonFormatter().format(answered))["command_type"] == "half\\ud83d"
