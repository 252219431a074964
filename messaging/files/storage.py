"""An upload's bytes: streamed to Django's storage API, removed after the commit that lets go of them.

The storage is `storages[UPLOAD_STORAGE]` ("default": `STORAGES["default"]`,
FileSystemStorage under `MEDIA_ROOT` unless the host sets S3 or another
backend). Files are kept under `messaging/uploads/<id>`, a name of the
app's own, never the user's.

The body is read once, in chunks, as the storage reads it (`BodyReader`):
counted (more than `MAX_UPLOAD_BYTES` stops it and removes what was
written), hashed (SHA-256: the key's bytes are compared by it) and checked
for a NUL byte (text holds none). Its first `HEAD_BYTES` are read before the
storage is opened, so bytes that are not of their type are refused before
anything is written.

Removal follows the row: every delete of an `Upload` (a message's delete,
`prune_uploads`, the cascade of its room or user, the admin) removes its
file once the transaction has committed (`post_delete`, then `on_commit`),
so a rollback keeps both. A removal that fails then (the storage away) or a
process that died mid-upload leaves a file no row names: `sweep_orphans`
(run by `prune_uploads`) removes those once they are older than the retention.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import IO, Any, Protocol, cast

from django.core.files import File
from django.core.files.storage import Storage, storages
from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from ..conf import get_settings
from .kinds import HEAD_BYTES
from .models import Upload

log = logging.getLogger(__name__)

FOLDER = "messaging/uploads"
CHUNK = 64 * 1024


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class TooLarge(Exception):
    """The body is over `MAX_UPLOAD_BYTES` (413); nothing of it is kept."""


def upload_storage() -> Storage:
    return storages[get_settings().UPLOAD_STORAGE]


class BodyReader:
    """A request's body read once, in chunks: counted against `limit`, hashed, and watched for NUL."""

    def __init__(self, source: Readable, limit: int) -> None:
        self.source = source
        self.limit = limit
        self.size = 0
        self.saw_nul = False
        self._hash = hashlib.sha256()
        self._ahead = b""

    def head(self) -> bytes:
        """The first `HEAD_BYTES` (fewer if the body is shorter), read ahead and still to come from `read`."""
        while len(self._ahead) < HEAD_BYTES:
            chunk = self.source.read(HEAD_BYTES - len(self._ahead))
            if not chunk:
                break
            self._ahead += chunk
        return self._ahead[:HEAD_BYTES]

    def read(self, size: int = -1) -> bytes:
        if self._ahead:
            chunk, self._ahead = self._ahead, b""
        else:
            chunk = self.source.read(CHUNK if size is None or size < 0 else size)
        self.size += len(chunk)
        if self.size > self.limit:
            raise TooLarge(f"the file is over MAX_UPLOAD_BYTES ({self.limit} bytes)")
        self._hash.update(chunk)
        self.saw_nul = self.saw_nul or b"\x00" in chunk
        return chunk

    def drain(self) -> None:
        """Read the rest, kept nowhere (a repeated key's bytes are compared, not stored again)."""
        while self.read(CHUNK):
            pass

    @property
    def digest(self) -> str:
        return self._hash.hexdigest()


@dataclass(frozen=True)
class Stored:
    # The upload's id to be, which names its file.
    id: Any
    file: str
    size: int
    digest: str
    saw_nul: bool


def store(reader: BodyReader, upload_id: Any) -> Stored:
    """The rest of `reader`'s body written to the storage as the file of `upload_id`.

    `TooLarge` (or the storage's own failure) removes what was written and passes on.
    """
    storage = upload_storage()
    wanted = f"{FOLDER}/{upload_id}"
    try:
        # A `File` without seek: the storage reads it once, chunk by chunk.
        name = storage.save(wanted, File(cast(IO[bytes], reader), name=wanted))
    except BaseException:
        remove_files([wanted])
        raise
    return Stored(upload_id, name, reader.size, reader.digest, reader.saw_nul)


def remove_files(names: Iterable[str]) -> None:
    """Remove the files `names` from the storage; a failure is logged, and the sweep finds the file later."""
    storage = upload_storage()
    for name in names:
        try:
            storage.delete(name)
        except Exception:
            log.exception("could not remove the upload %s from the storage; prune_uploads will", name)


@receiver(post_delete, sender=Upload)
def _remove_with_its_row(sender: Any, instance: Upload, **kwargs: Any) -> None:
    # After the commit: a rollback keeps the row, and so the file.
    transaction.on_commit(partial(remove_files, [instance.file]), using=kwargs.get("using"))


def sweep_orphans(older_than: datetime, *, batch: int = 1000, dry_run: bool = False) -> int:
    """Remove (or, `dry_run`, count) the files under `FOLDER` that no upload names and that
    were last written before `older_than`; how many."""
    storage = upload_storage()
    try:
        _, names = storage.listdir(FOLDER)
    except FileNotFoundError:
        return 0
    found = 0
    for start in range(0, len(names), batch):
        files = [f"{FOLDER}/{name}" for name in names[start : start + batch]]
        named = set(Upload.objects.filter(file__in=files).values_list("file", flat=True))
        orphans = [f for f in files if f not in named and _written_before(storage, f, older_than)]
        found += len(orphans)
        if not dry_run:
            remove_files(orphans)
    return found


def _written_before(storage: Storage, name: str, moment: datetime) -> bool:
    try:
        return storage.get_modified_time(name) < moment
    except (FileNotFoundError, NotImplementedError):
        return False
