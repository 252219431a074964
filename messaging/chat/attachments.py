"""`room.post`'s `attachments` (PROTOCOL.md 1.2, "Files"): a message's files.

A post lists 0-10 upload ids; each must be the sender's own upload and not
posted yet: a file belongs to one message, the one whose room's members may
fetch it, and it goes when that message is deleted (to share it in another
room, upload it again). A post with files may have an empty body.

The message keeps its files as its frames list them, less their `url`
(`Message.attachments`, read with the row: history, backlogs, replays and
search results need no lookup); each upload row keeps the message's room
and seq (who may fetch it, and what a delete removes).

Both forms of `room.post` hold the uploads' rows (locked, in id order,
before the room's row) and attach them in the post's transaction:

- the portable `hold` refuses (`invalid`) an upload that is missing, not
  the sender's, or posted already, unless this very command posted it (a
  duplicate whose other attempt committed first): then its record answers;
- the batch statement (sql/posts_and_records.sql, its `attached`, `held`,
  `declined` and `attach` parts) stores a post only if it holds all its
  uploads for the sender; any other post with files it declines (`DECLINED`),
  and the portable path settles it as above. The statement's parameter
  carries each such post's files as the message keeps them and as frames
  show them (`statement_files`), read before it runs: a batch without files
  reads nothing more.
"""

from __future__ import annotations

import functools
import re
import uuid
from typing import Any

import orjson
from django.db import IntegrityError

from ..core.exceptions import Invalid
from ..core.gateway import Gateway
from ..core.handlers import CommandContext
from ..files.models import Upload
from ..files.uploads import upload_url
from ..models import CommandRecord

# PROTOCOL.md 1.2: 0-10 upload ids.
MAX_ATTACHMENTS = 10


def validate_attachments(d: dict[str, Any]) -> tuple[str, ...]:
    """The upload ids of a post's `attachments` (canonical text, in the given order), or `Invalid`."""
    given = d.get("attachments")
    if given is None:
        return ()
    if not isinstance(given, list) or len(given) > MAX_ATTACHMENTS:
        raise Invalid(f"attachments must be a list of at most {MAX_ATTACHMENTS} upload ids")
    ids = []
    for item in given:
        try:
            ids.append(str(uuid.UUID(item)))
        except (TypeError, ValueError, AttributeError):
            raise Invalid("attachments must hold upload ids, as POST /api/uploads answers them") from None
    if len(set(ids)) != len(ids):
        raise Invalid("attachments lists an upload twice")
    return tuple(ids)


def kept(upload: Upload) -> dict[str, Any]:
    """An upload as its message keeps it: as frames show it, less the `url`."""
    return {"upload": str(upload.pk), "name": upload.name, "size": upload.size, "content_type": upload.content_type}


def shown(files: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """A message's kept files as its frames show them, each with its `url`."""
    return [{**file, "url": upload_url(file["upload"])} for file in files or ()]


def hold(ctx: CommandContext, ids: tuple[str, ...]) -> list[Upload]:
    """The uploads `ids`, their rows locked in id order until commit, each the
    sender's and not posted: `Invalid` otherwise, or `IntegrityError` where
    this command posted it (another attempt's commit: the record answers)."""
    if not ids:
        return []
    found = {str(u.pk): u for u in Upload.objects.select_for_update().filter(pk__in=ids).order_by("pk")}
    for upload_id in ids:
        upload = found.get(upload_id)
        if upload is None or upload.user_id != ctx.user.pk:
            raise Invalid(f"no upload {upload_id} of yours to attach")
        if upload.room_id is not None:
            if CommandRecord.objects.filter(user=ctx.user, command_id=ctx.command_id).exists():
                raise IntegrityError("applied by another attempt of this command")
            raise Invalid(f"upload {upload_id} is in a message already: upload it again to post it again")
    return [found[upload_id] for upload_id in ids]


def attach(uploads: list[Upload], room_id: int, seq: int) -> None:
    """The held `uploads` now belong to message `seq` of the room, in the post's transaction."""
    if uploads:
        Upload.objects.filter(pk__in=[u.pk for u in uploads]).update(room_id=room_id, seq=seq)


FILES_SQL = "SELECT id::text, name, size, content_type FROM {upload} WHERE id = ANY(%(ids)s::uuid[])"

# The posts' statement's parts for files (sql/posts_and_records.sql): between
# `-- files:begin` and `-- files:end`, the lines that end in `-- files`, and
# these two, a post's files in its row and in its event. A batch without
# files gets the statement without them: the plain posts' statement, to the
# node (a statement with them, its lists empty, cost a batch 5-17 % more).
FILES_BLOCK = re.compile(r"^-- files:begin.*?^-- files:end\n", re.S | re.M)
FILES_LINE = re.compile(r"^.*-- files\n", re.M)
FILES_MARK = re.compile(r"^-- files:(begin|end).*\n|  -- files$", re.M)
KEPT_SQL = "(SELECT a.kept FROM attached a WHERE a.n = p.n)"
SHOWN_SQL = " || coalesce((SELECT jsonb_build_object('attachments', a.shown) FROM attached a WHERE a.n = p.n), '{{}}')"


@functools.cache
def with_or_without_files(sql: str, files: bool) -> str:
    """The posts' statement `sql` with its parts for files, or without them (a batch without files)."""
    if files:
        return FILES_MARK.sub("", sql).replace("{files_kept}", KEPT_SQL).replace("{files_shown}", SHOWN_SQL)
    plain = FILES_LINE.sub("", FILES_BLOCK.sub("", sql))
    return plain.replace("{files_kept}", "NULL").replace("{files_shown}", "")


async def statement_files(
    gateway: Gateway, posts: list[tuple[str, ...]]
) -> tuple[str, list[list[dict[str, Any]]]] | None:
    """For the batch statement of posts whose upload ids are `posts` (in batch order):
    its `attachments` parameter, and per post its files as frames show them; None where
    one upload is in two posts of the batch (the batch goes the portable way, which
    refuses the second)."""
    ids = [upload_id for post in posts for upload_id in post]
    if len(set(ids)) != len(ids):
        return None
    if not ids:
        return "[]", [[] for _ in posts]
    found = {
        row[0]: {"upload": row[0], "name": row[1], "size": row[2], "content_type": row[3]}
        for row in await gateway.fetch(FILES_SQL.format(upload=Upload._meta.db_table), {"ids": ids})
    }
    parameter, frames = [], []
    for n, post in enumerate(posts, start=1):
        # A missing upload is kept as its id alone: the statement declines its post.
        files = [found.get(upload_id, {"upload": upload_id}) for upload_id in post]
        frames.append(shown(files) if post else [])
        if post:
            parameter.append([n, files, frames[-1]])
    return orjson.dumps(parameter).decode(), frames


def with_files(d: dict[str, Any], files: list[dict[str, Any]]) -> dict[str, Any]:
    """A `msg` frame's `d` with its files, where it has any."""
    if files:
        d["attachments"] = files
    return d


def message_files(message: Any) -> list[dict[str, Any]]:
    """A stored message's files as its frames show them (none once deleted)."""
    return shown(message.attachments) if message.attachments else []
