"""The app's signals in a host project's real daphne process (its `wallet` app's receivers,
wallet/signals.py), under the default room policy: on SQLite (the portable forms) and on
PostgreSQL (`room.post`'s batch statement),
each change heard once, whatever copies of its command arrive."""

from __future__ import annotations

import json

import pytest
import redis

from messaging.testing import SocketClient
from messaging_client import sign_in
from tests.support.servers import Daphne
from tests.support.venvs import run

HEARD = (
    "from wallet.models import Heard\n"
    "import json\n"
    "print(json.dumps(list(Heard.objects.order_by('pk').values_list('signal', 'room', 'command_id', 'seq'))))"
)


def heard(python, project, env) -> list[tuple[str, str, str, int | None]]:
    # The JSON is the last line: the shell may say first what it imported.
    return [
        tuple(row)
        for row in json.loads(run(python, "manage.py", "shell", "-c", HEARD, cwd=project, env=env).splitlines()[-1])
    ]


@pytest.fixture(params=["host", "uuid_host"], ids=["sqlite", "postgresql"])
def any_host(request):
    return request.getfixturevalue(request.param)


async def test_each_change_is_heard_once_over_real_sockets(any_host, tmp_path):
    python, project, env = any_host
    # The default policy: on PostgreSQL, posts take the batch statement.
    env = {**env, "HOST_DEFAULT_POLICY": "1"}
    room = f"signals-{project.name[-6:]}-{env.get('HOST_UUID_USERS', '0')}"
    run(
        python,
        "manage.py",
        "shell",
        "-c",
        "from wallet.models import Heard; Heard.objects.all().delete()",
        cwd=project,
        env=env,
    )
    server = Daphne(env, log_dir=tmp_path, app="hostsite.asgi:application", python=python, cwd=project, base_env={})
    server.start()
    try:
        ana = await SocketClient(server.url, sign_in(server.url, "ana-signals")).connect()
        try:
            assert (await ana.call("room.join", {"room": room}, id="j-1"))["ok"]
            assert (await ana.call("room.join", {"room": room}, id="j-2"))["ok"]  # a member already
            post = {"room": room, "body": "heard once"}
            first = await ana.call("room.post", post, id="p-1")
            assert (await ana.call("room.post", post, id="p-1"))["dup"]
            # Redis forgot it: the record answers, and nothing is heard again.
            redis.Redis.from_url(env["REDIS_URL"]).flushdb()
            assert (await ana.call("room.post", post, id="p-1"))["dup"]
            # Sent without waiting, as an outbox resends: batches of what arrived together, a copy among them.
            ids = [await ana.send("room.post", {"room": room, "body": f"b{n}"}, id=f"b-{n}") for n in range(4)]
            ids.append(await ana.send("room.post", {"room": room, "body": "b0"}, id="b-0"))
            acks = [await ana.ack(id) for id in ids]
            assert all(a["ok"] for a in acks) and sum(a["dup"] for a in acks) >= 1
            seq = first["d"]["seq"]
            for _ in range(2):
                assert (await ana.call("message.edit", {"room": room, "seq": seq, "body": "edited"}, id="e-1"))["ok"]
                assert (await ana.call("message.delete", {"room": room, "seq": seq}, id="d-1"))["ok"]
            assert (await ana.call("room.leave", {"room": room}, id="l-1"))["ok"]
            # A receiver that raises: logged; the post stands, and the other receivers hear it.
            assert (await ana.call("room.join", {"room": "signals-broken"}, id="j-3"))["ok"]
            assert (await ana.call("room.post", {"room": "signals-broken", "body": "x"}, id="x-1"))["ok"]
        finally:
            await ana.close()
        log = server.log()
    finally:
        server.stop()
    rows = heard(python, project, env)
    by_command = sorted((signal, command_id) for signal, _, command_id, _ in rows)
    assert by_command == sorted(
        [
            ("member_joined", "j-1"),
            ("message_posted", "p-1"),
            *(("message_posted", f"b-{n}") for n in range(4)),
            ("message_edited", "e-1"),
            ("message_deleted", "d-1"),
            ("member_left", "l-1"),
            ("member_joined", "j-3"),
            ("message_posted", "x-1"),
        ]
    ), rows
    assert {(signal, seq) for signal, _, command_id, seq in rows if command_id in ("p-1", "e-1", "d-1")} == {
        ("message_posted", seq),
        ("message_edited", seq),
        ("message_deleted", seq),
    }
    assert "this receiver fails on purpose" in log
