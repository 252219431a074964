"""Signed-in users in bulk, written straight into the database, for the
sockets curve and the big room: N sign-ins through `/login/` would take
minutes at 100,000 and measure the form, not the sockets.

Each user `<prefix><n>` gets a session as `django.contrib.auth.login` leaves
it (the user's id, the backend, the session's auth hash), encoded by the
session engine itself under the servers' `SECRET_KEY`, with the key
`<prefix>` + n padded to 32 characters: the same users and sessions again on
the next run (updated in place), so the tables do not grow run after run.

`python -m bench.signins COUNT PREFIX FILE` runs under the servers'
environment (Django's settings) and writes the session keys to FILE, one a
line, in the users' order; `bulk_sessions` runs it and reads them back.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def session_key(prefix: str, n: int) -> str:
    """User n's session key: lower-case letters and digits, 32 characters, as Django's own."""
    body = prefix.replace("-", "").lower()
    return body + str(n).zfill(32 - len(body))


def bulk_sessions(env: dict[str, str], count: int, prefix: str, out: Path) -> list[str]:
    """`count` users `<prefix>0`... signed in; their session keys, in order."""
    path = out / f"sessions-{prefix}.txt"
    subprocess.run(
        [sys.executable, "-m", "bench.signins", str(count), prefix, str(path)],
        cwd=ROOT,
        env={**os.environ, **env},
        check=True,
    )
    keys = path.read_text().split()
    if len(keys) != count:
        raise SystemExit(f"bench.signins wrote {len(keys)} sessions, not {count}")
    return keys


def main(count: int, prefix: str, path: Path) -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.sessions.backends.db import SessionStore
    from django.db import connection, transaction
    from django.utils import timezone

    if len(session_key(prefix, count)) > 32:
        raise SystemExit(f"the prefix {prefix!r} leaves no room for {count} keys")
    User = get_user_model()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff,"
            " is_active, date_joined) SELECT '', false, %s || g, '', '', '', false, true, now()"
            " FROM generate_series(0, %s - 1) g ON CONFLICT (username) DO NOTHING",
            [prefix, count],
        )
    users = {u.username: u for u in User.objects.filter(username__startswith=prefix).only("id", "username", "password")}
    store = SessionStore()
    backend = "django.contrib.auth.backends.ModelBackend"
    expires = (timezone.now() + timedelta(seconds=settings.SESSION_COOKIE_AGE)).isoformat()
    keys, rows = [], io.StringIO()
    for n in range(count):
        user = users[f"{prefix}{n}"]
        data = store.encode(
            {SESSION_KEY: str(user.pk), BACKEND_SESSION_KEY: backend, HASH_SESSION_KEY: user.get_session_auth_hash()}
        )
        key = session_key(prefix, n)
        keys.append(key)
        rows.write(f"{key}\t{data}\t{expires}\n")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE bench_sessions (LIKE django_session) ON COMMIT DROP")
        with cursor.copy("COPY bench_sessions (session_key, session_data, expire_date) FROM STDIN") as copy:
            copy.write(rows.getvalue())
        cursor.execute(
            "INSERT INTO django_session SELECT * FROM bench_sessions ON CONFLICT (session_key)"
            " DO UPDATE SET session_data = EXCLUDED.session_data, expire_date = EXCLUDED.expire_date"
        )
    path.write_text("\n".join(keys) + "\n")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))
