"""A host project's own room policy, named by `MESSAGING["ROOM_POLICY"]`, decides
who joins, posts and moderates: rooms `team-<group>` are that Django group's."""

from __future__ import annotations

import subprocess

from messaging.testing import SocketClient as WsClient
from messaging_client import sign_in
from tests.support.servers import Daphne


def shell(host, code: str) -> None:
    python, project, env = host
    proc = subprocess.run(
        [str(python), "manage.py", "shell", "-c", code],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def grant(host, name: str, group: str) -> None:
    shell(
        host,
        "from django.contrib.auth.models import Group, User\n"
        f"Group.objects.get_or_create(name={group!r})[0].user_set.add(User.objects.get(first_name={name!r}))",
    )


def revoke(host, name: str, group: str) -> None:
    shell(
        host,
        "from django.contrib.auth.models import Group, User\n"
        f"Group.objects.get(name={group!r}).user_set.remove(User.objects.get(first_name={name!r}))",
    )


async def test_the_hosts_policy_decides_who_joins_posts_and_moderates(host, tmp_path):  # noqa: F811
    python, project, env = host
    server = Daphne(env, log_dir=tmp_path, app="hostsite.asgi:application", python=python, cwd=project, base_env={})
    server.start()
    try:
        cleo = await WsClient(server.url, sign_in(server.url, "cleo-policy")).connect()
        dan = await WsClient(server.url, sign_in(server.url, "dan-policy")).connect()
        lead = await WsClient(server.url, sign_in(server.url, "lead-policy")).connect()
        try:
            grant(host, "cleo-policy", "blue")
            grant(host, "lead-policy", "blue")
            grant(host, "lead-policy", "blue-leads")
            joined = await cleo.call("room.join", {"room": "team-blue"})
            assert joined["ok"], joined
            # Not in the group: the host's policy refuses, as the default never would a public room.
            assert (await dan.call("room.join", {"room": "team-blue"}))["error"]["code"] == "forbidden"
            assert (await dan.call("room.join", {"room": "lobby"}))["ok"]
            assert (await cleo.call("room.post", {"room": "team-blue", "body": "blue only"}))["ok"]
            # Out of the group, a member no longer posts: the policy is asked on every post.
            revoke(host, "cleo-policy", "blue")
            refused = await cleo.call("room.post", {"room": "team-blue", "body": "still here?"})
            assert refused["error"]["code"] == "forbidden"
            # The group's leads moderate a room nobody owns.
            assert (await lead.call("room.join", {"room": "team-blue"}))["ok"]
            cleo_id = next(m["user"] for m in joined["d"]["members"] if m["name"] == "cleo-policy")
            removed = await lead.call("room.remove", {"room": "team-blue", "user": cleo_id})
            assert removed["ok"], removed
            assert (await dan.call("room.remove", {"room": "lobby", "user": cleo_id}))["error"]["code"] == "forbidden"
        finally:
            for ws in (cleo, dan, lead):
                await ws.close()
    finally:
        server.stop()
