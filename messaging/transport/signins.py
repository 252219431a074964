"""Whether the credentials of a process's sockets still sign their users in (PROTOCOL.md 1.2, "Credentials end everywhere").

A socket's `Credential` is what signed it in at the handshake: an API token
(`scope["api_token"]`, messaging/transport/auth.py), else its session, and
always its user. It has ended once the session was logged out, flushed,
expired or invalidated (the session's own decision, messaging/transport/sessions.py),
the token was revoked, expired or deleted, or the user was deleted or made
inactive. `ended` answers for every socket of a process at once, in a
bounded number of reads (below); `credential_watch` is the event loop's
watcher (messaging/transport/watch.py) that asks it every
`SESSION_CHECK_INTERVAL` and closes those sockets with 4401. A session
that signed its user in at the watch's last round, and whose data, user and
password are the same, is not decoded again (`Verified`, sessions.py), and
on PostgreSQL a credential whose rows are the versions the last round
decided on is not read again (`Stamps`, stamps.py).

The reads, per `CHUNK` distinct credentials: one query for the users, one
for the tokens, and with the database session engine one for the sessions
(another engine: a read per session; a backend whose `get_user` is not
`ModelBackend`'s: a read per session's user). Reads only, on the commands'
database threads.
"""

from __future__ import annotations

from collections.abc import Collection
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple

from django.contrib.auth import get_user_model
from django.utils import timezone

from ..conf import get_settings
from ..core.runtime import runtime
from ..models import ApiToken
from .sessions import Verified, among, encoded_sessions, signs_in, stored_sessions
from .stamps import Stamp, Stamps
from .watch import CredentialWatch

# Credentials asked about in one query of each kind: an `IN` list of this many
# keys is well within what every database takes in one statement.
CHUNK = 2000


class Credential(NamedTuple):
    """What signed a socket in: its user's pk and either its token's row id or its session's key (or neither).

    A tuple, not a frozen dataclass: a round hashes each credential of the
    process's sockets about eight times (sets, the stamps' dicts), and a
    tuple hashes in C, four times faster than a dataclass's `__hash__`.
    """

    user_id: Any
    session_key: str | None = None
    token_id: int | None = None


def credential_of(scope: dict[str, Any], user: Any) -> Credential:
    """The credential that signed the handshake of `scope` in as `user`."""
    token_id = scope.get("api_token")
    if token_id is not None:
        return Credential(user.pk, token_id=token_id)
    return Credential(user.pk, session_key=getattr(scope.get("session"), "session_key", None))


def ended(
    credentials: Collection[Credential], verified: Verified | None = None, stamps: Stamps | None = None
) -> set[Credential]:
    """Those of `credentials` that no longer sign their users in. A watch's rounds pass what the
    last round kept: `verified`, the sessions it found signing in, and `stamps`, the versions of
    the rows its decisions were made on (those whose rows are unchanged are not read again)."""
    found: set[Credential] = set()
    if verified is not None:
        verified.start()
    fresh: dict[Credential, Stamp] = {}
    if stamps is not None and stamps.start():
        asked = credentials if isinstance(credentials, AbstractSet) else set(credentials)
        same = stamps.unchanged(asked, timezone.now())
        if len(same) == len(asked) == len(stamps.last):
            stamps.keep_last()  # a quiet round: every stamp of the last round holds, and no other is asked for
        else:
            stamps.keep((c, stamps.last[c]) for c in same)
        # Only the credentials to read are listed: a quiet round lists none.
        given = [c for c in credentials if c not in same] if len(same) < len(asked) else []
        fresh = stamps.read(given) if given else {}
    else:
        given = list(credentials)
    for start in range(0, len(given), CHUNK):
        found |= _ended(given[start : start + CHUNK], verified)
    if stamps is not None:
        if fresh:
            stamps.keep((c, stamp) for c, stamp in fresh.items() if c not in found)
        stamps.end()
    if verified is not None:
        verified.end()
    return found


def _ended(credentials: list[Credential], verified: Verified | None) -> set[Credential]:
    now = timezone.now()
    users = {
        str(user.pk): user
        for user in among(get_user_model()._default_manager.all(), "pk", {c.user_id for c in credentials})
    }
    token_ids = {c.token_id for c in credentials if c.token_id is not None}
    tokens = (
        {
            pk: (str(owner), revoked_at, expires_at)
            for pk, owner, revoked_at, expires_at in among(ApiToken.objects.all(), "pk", token_ids).values_list(
                "pk", "user_id", "revoked_at", "expires_at"
            )
        }
        if token_ids
        else {}
    )
    keys = {c.session_key for c in credentials if c.token_id is None and c.session_key}
    encoded = encoded_sessions(keys) if keys and verified is not None else None
    sessions = stored_sessions(keys) if keys and encoded is None else {}

    def token_signs_in(token_id: int, user_id: Any) -> bool:
        owner, revoked_at, expires_at = tokens.get(token_id, (None, None, None))
        return owner == str(user_id) and revoked_at is None and (expires_at is None or expires_at > now)

    def still_signs_in(credential: Credential) -> bool:
        user = users.get(str(credential.user_id))
        if user is None or not getattr(user, "is_active", True):
            return False
        if credential.token_id is not None:
            return token_signs_in(credential.token_id, credential.user_id)
        if credential.session_key and encoded is not None and verified is not None:
            return verified.signs_in(encoded.get(credential.session_key), credential.user_id, users)
        if credential.session_key:
            return signs_in(sessions.get(credential.session_key, {}), credential.user_id, users)
        return True  # signed in by something else (a host's own middleware): the user alone

    return {credential for credential in credentials if not still_signs_in(credential)}


def credential_watch() -> CredentialWatch[Credential] | None:
    """The running loop's watcher of its sockets' credentials; None when `SESSION_CHECK_INTERVAL` is 0 (off)."""
    interval = get_settings().SESSION_CHECK_INTERVAL
    if interval <= 0:
        return None
    loop_runtime = runtime()
    # The watch runs one round at a time, so its rounds share these.
    verified, stamps = Verified(), Stamps()

    async def check(credentials: set[Credential]) -> set[Credential]:
        # On the commands' threads: channels' one database thread also signs
        # in every new socket, and must not queue behind checks.
        gone: set[Credential] = await loop_runtime.gateway.run(ended, credentials, verified, stamps)
        return gone

    return loop_runtime.part("credential_watch", lambda: CredentialWatch(check, interval), CredentialWatch.stop)
