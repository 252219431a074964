"""Which credentials' rows are as a watch's last round read them: one query per table, on PostgreSQL.

A round of credential checks (signins.py) decides, for each of a process's
sockets, from its user's row and its session's or token's row. Between two
rounds of an idle process almost none of those rows change, yet reading
them all again costs the process most of an idle socket's CPU (a model
instance per user, a row per session). PostgreSQL gives every version of a
row its own `xmin`, the transaction that wrote it, so a round asks only
which rows are no longer the version the last decision was made on: one
query per table, the rows' keys and `xmin`s sent as two array literals, and
only the changed or deleted rows' keys come back. The literals are
parameters bound on the server, never prepared (`server_bound_cursor`):
no connection keeps a statement's text with every key in it, and each run
is planned for its own number of keys. Those credentials, the
new ones and the ones whose expiry has come, are decided again in full; the
others still sign in. A quiet round (the same credentials as the last, none
changed or expired) sends the last round's probe as it was built and keeps
the last round's stamps as they are: an idle process's round is its three
queries and a copy of its credentials' set, with no step per credential in
Python.

A stamp is read before the rows its decision reads: a row that changes in
between is decided on its newer version and stamped with the older one, so
the next round decides it again. Stamps are kept only where the decision
is the rows' alone: on PostgreSQL, with the database session engine, and
backends whose `get_user` is `ModelBackend`'s (or that have none) over a
user model with Django's session hash. Anything else is decided in full every round.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from importlib import import_module
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model, load_backend
from django.contrib.auth.backends import ModelBackend
from django.db import connections, router

from ..core.gateway import server_bound_cursor
from ..models import ApiToken
from .sessions import plain_hash, sessions_are_rows

if TYPE_CHECKING:
    from .signins import Credential


# Primary keys as text and the row versions they were stamped with, in step.
Probe = tuple[list[str], list[str]]
# The same as two PostgreSQL array literals (`array`), as a probe's query sends them.
Literals = tuple[str, str]
NO_PROBE: tuple[Literals, Literals, Literals] = (("", ""), ("", ""), ("", ""))


@dataclass(frozen=True, slots=True)
class Stamp:
    """The versions a credential was decided on: its user's row's and its session's or token's, and its expiry."""

    user: str
    row: str | None = None
    until: datetime | None = None


class Stamps:
    """A watch's stamps of the credentials its last round found signing in (held by one watch, one round at a time)."""

    def __init__(self) -> None:
        self.last: dict[Credential, Stamp] = {}
        self.this: dict[Credential, Stamp] = {}
        self.settings: tuple[Any, ...] = ()
        # The probe of `probed` (a round's `last`, by identity), as its three
        # queries' array literals, and the earliest expiry among its stamps:
        # a quiet round asks again what the round before it asked, without
        # a step per credential in Python.
        self.probed: dict[Credential, Stamp] | None = None
        self.probe = NO_PROBE
        self.expires_first: datetime | None = None

    def start(self) -> bool:
        """A round begins: whether stamps hold (else every credential is decided in full, as without them)."""
        now = (
            settings.SECRET_KEY,
            tuple(settings.SECRET_KEY_FALLBACKS),
            tuple(settings.AUTHENTICATION_BACKENDS),
            settings.SESSION_ENGINE,
        )
        if now != self.settings:
            self.settings, self.last, self.this = now, {}, {}
        return rows_decide()

    def unchanged(self, credentials: Collection[Credential], now: datetime) -> Collection[Credential]:
        """Those of `credentials` stamped by the last round whose rows are the same versions and not expired."""
        if (
            self.last is self.probed
            and (self.expires_first is None or self.expires_first > now)
            and self.last.keys() == credentials
        ):
            # The same credentials as the last round, all stamped by it and
            # none expired: the last round's probe, as it was sent.
            gone = self.changed(*self.probe)
            return self.last.keys() if not gone else self.still(self.last, gone)
        stamped = {
            c: stamp
            for c in credentials
            if (stamp := self.last.get(c)) is not None and (stamp.until is None or stamp.until > now)
        }
        if not stamped:
            return set()
        # Keys and versions as two lists of strings, an entry per credential
        # (a key may repeat, with the version each credential was stamped
        # with). Sets of (key, version) tuples, held through the round's
        # queries, made the collector promote tens of thousands of objects a
        # round at 10,000 sockets and walk the whole heap every few rounds.
        users: Probe = ([], [])
        sessions: Probe = ([], [])
        tokens: Probe = ([], [])
        for c, stamp in stamped.items():
            users[0].append(str(c.user_id))
            users[1].append(stamp.user)
            if not stamp.row:
                continue
            if c.token_id is not None:
                tokens[0].append(str(c.token_id))
                tokens[1].append(stamp.row)
            elif c.session_key:
                sessions[0].append(c.session_key)
                sessions[1].append(stamp.row)
        probe = (literals(users), literals(sessions), literals(tokens))
        if stamped.keys() == self.last.keys():
            # Every credential of the last round is asked about again: the
            # next round may send this probe as it is, if nothing changes.
            self.probed, self.probe = self.last, probe
            self.expires_first = min((s.until for s in stamped.values() if s.until is not None), default=None)
        gone = self.changed(*probe)
        return set(stamped) if not gone else self.still(stamped, gone)

    @staticmethod
    def changed(users: Literals, sessions: Literals, tokens: Literals) -> set[tuple[str, str]]:
        gone = changed(get_user_model(), users)
        gone |= changed(session_model(), sessions)
        gone |= changed(ApiToken, tokens)
        return gone

    @staticmethod
    def still(stamped: dict[Credential, Stamp], gone: set[tuple[str, str]]) -> set[Credential]:
        """Those of `stamped` none of whose rows is among the changed `gone`."""
        return {
            c
            for c, stamp in stamped.items()
            if (str(c.user_id), stamp.user) not in gone
            and (c.session_key, stamp.row) not in gone
            and (str(c.token_id), stamp.row) not in gone
        }

    def read(self, credentials: Collection[Credential]) -> dict[Credential, Stamp]:
        """The stamps of `credentials` as their rows are now (read before the rows their decision reads)."""
        users = versions(get_user_model(), {str(c.user_id) for c in credentials})
        session_keys = {c.session_key for c in credentials if c.token_id is None and c.session_key}
        sessions = versions(session_model(), session_keys, "expire_date") if session_keys else {}
        token_ids = {str(c.token_id) for c in credentials if c.token_id is not None}
        tokens = versions(ApiToken, token_ids, "expires_at") if token_ids else {}
        stamps = {}
        for c in credentials:
            user = users.get(str(c.user_id))
            own = tokens.get(str(c.token_id)) if c.token_id is not None else sessions.get(c.session_key or "")
            if user is None or (c.token_id is not None or c.session_key) and own is None:
                continue  # gone: decided (and refused) in full, never stamped
            stamps[c] = Stamp(user[0], own[0], own[1]) if own is not None else Stamp(user[0])
        return stamps

    def keep(self, stamps: Iterable[tuple[Credential, Stamp]]) -> None:
        if self.this is self.last:
            self.this = dict(self.last)  # never change the last round's (a probe may be of it)
        self.this.update(stamps)

    def keep_last(self) -> None:
        """Every stamp of the last round holds for this one (a quiet round): kept as they are, the same dict."""
        self.this = self.last

    def end(self) -> None:
        self.last, self.this = self.this, {}
        if self.probed is not self.last:
            # The probe was of stamps no round will start from again.
            self.probed, self.probe, self.expires_first = None, NO_PROBE, None


def rows_decide() -> bool:
    """Whether a credential's decision is its rows' alone (the module's docstring)."""
    if connections[router.db_for_read(get_user_model())].vendor != "postgresql":
        return False
    if not sessions_are_rows():
        return False
    store = import_module(settings.SESSION_ENGINE).SessionStore
    if connections[router.db_for_read(store.get_model_class())].vendor != "postgresql":
        return False
    # A backend without `get_user` (django-axes' standalone backend, say) never signs a session in.
    backends = [b for b in map(load_backend, settings.AUTHENTICATION_BACKENDS) if hasattr(b, "get_user")]
    user = get_user_model()
    return (
        all(isinstance(b, ModelBackend) and type(b).get_user is ModelBackend.get_user for b in backends)
        and plain_hash(user())
        and hasattr(user, "password")
    )


def session_model() -> Any:
    return import_module(settings.SESSION_ENGINE).SessionStore.get_model_class()


def array(values: Iterable[str]) -> str:
    """A PostgreSQL array literal of `values`, each quoted: one text parameter, which costs the
    driver far less than adapting a list of thousands of values every round."""
    return "{" + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "}"


def literals(probe: Probe) -> Literals:
    keys, xmins = probe
    return (array(keys), array(xmins)) if keys else ("", "")


def changed(model: Any, probe: Literals) -> set[tuple[str, str]]:
    """Those of `probe`'s (primary key as text, version) pairs whose row of `model` is gone or another version."""
    keys, xmins = probe
    if not keys:
        return set()
    connection, table, key, key_type = about(model)
    sql = (
        f"SELECT k.key, k.stamp::text FROM unnest(%s::{key_type}[], %s::xid[]) AS k(key, stamp) "
        f"LEFT JOIN {table} AS r ON r.{key} = k.key AND r.xmin = k.stamp WHERE r.{key} IS NULL"
    )
    with server_bound_cursor(connection, prepared=False) as cursor:
        cursor.execute(sql, [keys, xmins])
        return {(str(row[0]), row[1]) for row in cursor.fetchall()}


def versions(model: Any, keys: Collection[str], *also: str) -> dict[str, tuple[Any, ...]]:
    """Each row of `model` whose primary key (as text) is among `keys`: its `xmin`, then the fields `also`."""
    connection, table, key, key_type = about(model)
    columns = "".join(f", {connection.ops.quote_name(model._meta.get_field(name).column)}" for name in also)
    sql = f"SELECT {key}, xmin::text{columns} FROM {table} WHERE {key} = ANY(%s::{key_type}[])"
    with server_bound_cursor(connection, prepared=False) as cursor:
        cursor.execute(sql, [array(keys)])
        return {str(row[0]): tuple(row[1:]) for row in cursor.fetchall()}


def about(model: Any) -> tuple[Any, str, str, str]:
    """The connection that reads `model`, its quoted table, its quoted primary key column and that column's type."""
    connection = connections[router.db_for_read(model)]
    quote = connection.ops.quote_name
    pk = model._meta.pk
    return connection, quote(model._meta.db_table), quote(pk.column), pk.rel_db_type(connection)
