"""An echo bot on `messaging_client`: answers every "!echo TEXT" in its rooms exactly once.

    pip install messaging-client       # in this repository: pip install clients/python (no Django)
    python examples/bot.py http://127.0.0.1:8000 --room lobby --state bot-state
    MESSAGING_TOKEN=msg_... python examples/bot.py http://127.0.0.1:8000 --room lobby   # as a real user

"Once" holds through dropped sockets, server restarts and restarts of the bot
itself, with no bookkeeping of its own beyond two files in `--state`:

- the session, so that a restarted bot is the same user (command ids are
  scoped per user: a new guest's ids are new commands), unless it signs in
  with an API token (`MESSAGING_TOKEN`, from `manage.py messaging_token
  USERNAME`), which is the same user every time;
- the outbox (`FileStore`), so that a reply whose ack was lost is resent with
  its id after the restart;
- and the reply's id is derived from the message it answers
  (`echo-<room>-<seq>`), so a message seen again (a restarted bot reads its
  rooms' last messages again) asks for the same reply, which the server
  answers as a duplicate without posting twice.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from pathlib import Path

from messaging_client import Client, FileStore, Unauthorized, asign_in

PREFIX = "!echo "


def reply_id(message: dict) -> str:
    return f"echo-{message['room']}-{message['seq']}"


async def session_for(url: str, name: str, state: Path) -> str:
    saved = state / "session"
    if saved.exists():
        return saved.read_text().strip()
    session = await asign_in(url, name)
    state.mkdir(parents=True, exist_ok=True)
    saved.write_text(session)
    return session


async def run(url: str, name: str, rooms: list[str], state: Path, token: str | None = None) -> None:
    state.mkdir(parents=True, exist_ok=True)
    if token:
        client = Client(url, token=token, store=FileStore(state / "outbox.json"))
        # A token that signs nobody in (revoked) ends the bot: Unauthorized.
        await client.start()
    else:
        client = Client(url, session=await session_for(url, name, state), store=FileStore(state / "outbox.json"))
        try:
            await client.start()
        except Unauthorized:
            # The saved session has ended (signed out, expired): a new guest, with a fresh outbox.
            (state / "session").unlink(missing_ok=True)
            (state / "outbox.json").unlink(missing_ok=True)
            return await run(url, name, rooms, state)
    replies: set[asyncio.Task] = set()
    try:
        events = client.events()
        for room in rooms:
            await client.join(room)
        async for event in events:
            message = event.get("d") or {}
            if event["t"] != "msg" or not message.get("body", "").startswith(PREFIX):
                continue
            # Not awaited here: the events keep flowing while the reply waits for its ack.
            reply = asyncio.create_task(
                client.submit(
                    "room.post",
                    {"room": message["room"], "body": message["body"][len(PREFIX) :]},
                    id=reply_id(message),
                )
            )
            replies.add(reply)
            reply.add_done_callback(replies.discard)
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", help="the server, e.g. http://127.0.0.1:8000")
    parser.add_argument("--room", action="append", required=True, help="a room to answer in (repeatable)")
    parser.add_argument("--name", default="echo-bot")
    parser.add_argument("--state", type=Path, default=Path("bot-state"), help="where the session and outbox live")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    asyncio.run(run(args.url, args.name, args.room, args.state, os.environ.get("MESSAGING_TOKEN")))


if __name__ == "__main__":
    main()
