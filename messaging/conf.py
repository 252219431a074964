"""The only module that reads Django settings for the app.

All options live in one dict, `settings.MESSAGING`; each has a typed default:

| key | default | meaning |
| --- | --- | --- |
| `DEDUP_WINDOW` | 3600 | seconds a command's result stays in Redis |
| `CLAIM_LEASE` | 10 | seconds a claim blocks its id if its owner dies |
| `IN_PROGRESS_WAIT` | 2.0 | seconds a duplicate waits for the first attempt before `in_progress` |
| `MAX_FRAME_BYTES` | 65536 | largest text frame; larger ones close the socket with 1009 |
| `REPLAY_LIMIT` | 500 | most messages sent as backlog on `room.join` with `since`, and most changes with `since_rev` (which also stops at half of `MAX_SEND_BUFFER` in bytes; the ack's `rev_upto` says where) |
| `RECENT_ON_JOIN` | 50 | messages sent as backlog on `room.join` without `since` |
| `MEMBERS_ON_JOIN` | 100 | most members a `room.join` ack lists (with `members_total`; `room.members` pages through the rest); in a room of more members, receipts broadcast no `status` frames |
| `STATES_PER_RECEIPT` | 500 | most `state` frames one receipt sends per state (`delivered`, `read`): those of the newest messages it moved |
| `BODY_MAX_CHARS` | 4000 | longest message body, after trimming |
| `BAD_FRAME_LIMIT` | 10 | malformed frames in a row that close the socket with 1008 |
| `MAX_SEND_BUFFER` | 1048576 | bytes that may wait for one socket's client to read them; past it the socket is closed with 1008 and what waited is dropped. Also the largest frame the server sends, under every server (`largest_frame`): a `room.history` page and the member lists of a join ack and of `room.members` hold what fits in it; a host type's larger frame is replaced by a `frame_too_large` error frame. The longest message (`BODY_MAX_CHARS`) must fit in it, or the app refuses to start |
| `SERVER_ADAPTERS` | True | write a socket's frames to the server's connection itself where there is an adapter for it (daphne; uvicorn with websockets' Sans-I/O implementation: messaging/transport/servers/); False sends every frame through the ASGI `send`, by a task per busy socket: slower, for a server version whose internals the adapter does not know (docs/OPERATIONS.md) |
| `DAPHNE_DIRECT_WRITES` | False | under daphne, a frame for a socket whose connection holds nothing unsent is written to its socket at once, as asyncio's transports do, instead of on the loop's next turn through Twisted's buffer: two system calls fewer per frame (docs/OPERATIONS.md, "Loop stalls"); plain TCP only |
| `INBOX_LIMIT` | 200 | frames one socket may have received and not yet answered; a command past it is refused at once with `rate_limited` |
| `REPLY_BYTES_PER_TOKEN` | 32768 | bytes of a command's replies (a join's backlog) that cost one more token of the socket's `RATE_BURST` |
| `REDIS_URL` | None | Redis for the dedup window; None keeps only the durable record |
| `REDIS_CLUSTER` | False | `REDIS_URL` names a node of a Redis Cluster (7 or later): claims and results hash per user, fan-out goes over sharded Pub/Sub (docs/OPERATIONS.md) |
| `REDIS_TIMEOUT` | 0.5 | seconds before a Redis call counts as failed and the database path takes over |
| `METRICS_TOKEN` | None | bearer token a scraper must send to `/metrics`; None turns `/metrics` off (404) |
| `RECORD_RETENTION` | 2592000 | seconds (30 days) `prune_command_records` keeps the durable records of custom command types |
| `RECEIPT_TIMES_RETENTION` | 7776000 | seconds (90 days) `prune_watermark_moves` keeps the watermark moves that date each recipient's delivered and read |
| `GUEST_RETENTION` | 2592000 | seconds (30 days) a guest account of `/login/` must have been idle before `prune_guests` deletes it (guests who posted are kept) |
| `RATE_BURST` | 100 | commands one socket may send at once (a reconnecting outbox resends its whole backlog) |
| `RATE_PER_SECOND` | 20.0 | commands per second one socket may keep up; above it: `rate_limited` |
| `USER_RATE_LIMIT` | 600 | commands one user may send per `USER_RATE_WINDOW`, over all sockets and processes |
| `USER_RATE_WINDOW` | 10.0 | seconds of the per-user window (counted in Redis; per process without it) |
| `SESSION_CHECK_INTERVAL` | 5.0 | seconds between a process's rounds of checks that its sockets' credentials (session, API token, user) still sign them in; a socket whose credential ended is closed with 4401. One round reads all its sockets at once (docs/OPERATIONS.md, "Credential checks"); 0 turns them off |
| `MEMBERSHIP_CHECK_INTERVAL` | 30.0 | seconds between a process's checks, in the database, that the users of its sockets in private rooms are still members there (a `room.left` lost on its way, a membership deleted by an admin); a socket whose user is not is told with `room.left` and hears no more of the room. A process also checks as its Pub/Sub subscription connects again after a failure, before it hands on any frame. 0 turns the periodic check off |
| `DB_THREADS` | 0 | threads that run commands, each with its own database connection; 0: channels' one thread. Exactly-once commands that arrive together run as one batch, at most `DB_THREADS // 2` (at least 1) batches at once |
| `BATCH_SETTLE` | 2 | rounds of the event loop's callbacks the next batch of exactly-once commands waits after one ends, so that the sockets it answered send their next commands into it (`messaging/core/batches.py`); 0: it starts with the first to arrive |
| `RATE_WINDOW_KEYS` | 10000 | most keys (users, client addresses) each of a process's own rate windows holds; past it the least recently hit are forgotten |
| `CONNECT_RATE` | 120 | WebSocket handshakes per client address per `CONNECT_RATE_WINDOW`, over all processes (counted in Redis; per process without it); past it the handshake is refused with 403; 0 turns it off |
| `CONNECT_RATE_WINDOW` | 60.0 | seconds of the handshake window |
| `ROOMS_CREATED_PER_HOUR` | 50 | rooms one user may create (by joining a slug that does not exist) in any hour, counted in the database; past it such a join is `rate_limited` and creates nothing; 0 turns it off |
| `ROOMS_CREATED_PER_ADDRESS_PER_HOUR` | 500 | rooms that may be created from one client address (messaging/transport/addresses.py) in any hour, by every user together (`room.join` of a new slug, `room.create`, `dm.open`), counted in the database; past it `rate_limited` and nothing is created; commands from server code (`messaging.submit`) have no address and are not counted; 0 turns it off |
| `EMPTY_ROOM_RETENTION` | 2592000 | seconds (30 days) a room that never had a message (`last_rev` 0) must be old, and its newest member must have joined or invitation been sent, before `prune_empty_rooms` deletes it |
| `TRUSTED_PROXIES` | `()` | the reverse proxies in front of the servers: addresses or CIDR blocks, as a list or one comma-separated string. A connection from one of them is taken to come from the address its `X-Forwarded-For` names (read from the right, past the trusted ones); from anyone else, from its peer address. A malformed entry stops the start with `ImproperlyConfigured` (check `messaging.E001`) |
| `ROOMS_PER_SOCKET` | 200 | rooms one socket may have joined at once; a join of one more is `invalid` and changes nothing; 0 turns it off. Also the most rooms of one event stream (`GET /api/stream?rooms=`; more: 400) |
| `STREAM_PING_INTERVAL` | 15.0 | seconds between the `: ping` comments an idle event stream (`GET /api/stream`) sends, so that proxies keep it open |
| `SHARED_HEADER_PAIRS` | 1000 | most request header pairs a process keeps one copy of for all its WebSockets and event streams (`host`, `origin`, `user-agent` and others every connection has in common; never a cookie or a credential: messaging/transport/header_pairs.py); past it the oldest leaves; 0 turns it off |
| `EDIT_HISTORY_RETENTION` | 0 | seconds the body an edit replaced is kept in the message's version history (the admin shows it); 0 keeps none. A delete clears them at once; `prune_edit_history` clears older ones |
| `MODERATION_RETENTION` | 31536000 | seconds (365 days) `prune_moderation_actions` keeps the moderation audit's rows (`ModerationAction`: removals, invitations, deletes by a moderator) |
| `ROOMS_LIST_LIMIT` | 500 | most rooms one `rooms.list` answer lists (the most recently active; `more` says whether there are others) |
| `ROOM_POLICY` | `"messaging.chat.policy.RoomPolicy"` | dotted path of the class every command asks who may join, post, invite, moderate, edit and delete (docs/INTEGRATION.md) |
| `INVITES_PER_HOUR` | 200 | invitations one user may send with `room.invite` in any hour, counted in the database; past it `rate_limited`; 0 turns it off |
| `REINVITE_AFTER` | 604800 | seconds (7 days) after a user declined an invitation to a room, or left it, before `room.invite` may invite them to it again (`forbidden` until then); 0: at once |
| `INVITATIONS_LIST_LIMIT` | 100 | most pending invitations one `rooms.list` answer lists (the newest; `more` says whether there are others) |
| `TYPING_STATES` | 10000 | users typing in a room that one process keeps a lapse timer for; a `typing: true` past it is `rate_limited` |
| `PRESENCE_TTL` | 30 | seconds within which a process that dies takes its users offline (its heartbeat's entries expire `PRESENCE_TTL - 1.5 * PRESENCE_BEAT` after its last beat) |
| `PRESENCE_BEAT` | 10 | seconds between a process's heartbeats (one pipelined round trip for all its users); below `PRESENCE_TTL` / 2.5 |
| `PRESENCE_ROOMS` | 200 | most rooms a user's `presence` frame goes to (its most recently joined ones) |
| `EVENTS_OUTBOX` | True | every effect writes its event to the outbox in its own transaction (docs/EVENTS.md); False writes none (the bench's "without") |
| `EVENTS_URL` | None | where `messaging_relay` publishes and `messaging_consume` reads: None for the Redis stream on `REDIS_URL`, `redis://...` for another Redis, `nats://HOST:PORT` for NATS JetStream |
| `EVENTS_STREAM` | `"messaging:events"` | the Redis stream's key |
| `CLAIM_STORE` | None | dotted path of the claim store's class (the fast window of exactly-once); None: `ClusterClaimStore` with `REDIS_CLUSTER`, `RedisClaimStore` with `REDIS_URL`, else `ClaimStore` (every command takes the database path). messaging/backends.py, docs/INTEGRATION.md |
| `HUB` | None | dotted path of the live fan-out's class; None: `RedisHub` with `REDIS_URL` (sharded Pub/Sub with `REDIS_CLUSTER`), else `Hub` (this process's sockets only) |
| `EVENTS_SINK` | None | dotted path of the class the relay publishes with; None: by `EVENTS_URL`'s scheme (`NatsSink` for `nats://`, `RedisStreamSink` for `redis://`) |
| `EVENTS_GROUP` | None | dotted path of the class of a group's consumer (`messaging_consume`); None: by the same scheme (`NatsConsumer`, `Consumer`) |
| `EVENTS_STREAM_MAXLEN` | 1000000 | entries the Redis stream keeps, roughly (`XADD ... MAXLEN ~`); older ones are trimmed |
| `EVENTS_BATCH` | 500 | most events a relay reads and publishes at once, and most entries a consumer reads at once |
| `EVENTS_PARTITIONS` | 16 | the outbox's partitions (by room): each is published by one relay at a time, so several relays share the work and keep each room's order |
| `EVENTS_POLL_INTERVAL` | 0.2 | seconds an idle relay waits before it looks for new events again |
| `EVENTS_RETENTION` | 604800 | seconds (7 days) published events, and consumer groups' inbox records, are kept before `messaging_relay` prunes them |
| `EVENTS_MAX_ATTEMPTS` | 5 | failures of a consumer's handler on one event before it goes to the dead letters |
| `EVENTS_STUCK_AFTER` | 60.0 | seconds the oldest unpublished event may wait before `/healthz` reports the relay stuck (in its body; the status stays 200) |
| `WEBHOOK_TIMEOUT` | 10.0 | seconds a webhook endpoint has to answer one POST; longer counts as a failed attempt |
| `WEBHOOK_MAX_ATTEMPTS` | 8 | attempts of one delivery before it is dead and goes to the dead letters |
| `WEBHOOK_BACKOFF` | 2.0 | seconds of the first retry's backoff cap; it doubles per attempt (full jitter beneath it) |
| `WEBHOOK_BACKOFF_CAP` | 3600.0 | the most seconds between two attempts of a delivery |
| `WEBHOOK_BATCH` | 20 | deliveries one `messaging_webhooks` round leases and sends |
| `WEBHOOKS_ALLOW_PRIVATE` | False | webhook endpoints may be on loopback, private, link-local and other non-public addresses (a test's, a private network's); off, such an endpoint is refused when it is saved and when it is delivered to (docs/EVENTS.md) |
| `MENTIONS_PER_MESSAGE` | 20 | most distinct `@name`s of one message that the mentions consumer looks up and notifies |
| `MENTION_EMAILS_PER_HOUR` | 10 | mention e-mails one user gets in any hour; the mentions past it wait and go out together in one e-mail (a digest) once the hour has room again (docs/EVENTS.md) |
| `MENTION_DIGEST_ITEMS` | 50 | mentions one digest e-mail quotes, oldest first; it counts the rest ("and 12 more") |
| `NOTIFICATION_RETENTION` | 2592000 | seconds (30 days) `prune_notifications` keeps mentions (`Notification`: the badge's rows, with the message's text), read or not |
| `API_TOKENS_PER_USER` | 20 | active API tokens one user may have (`messaging_token`, the admin); one more is refused until one is revoked |
| `MAX_UPLOAD_BYTES` | 10485760 | largest file `POST /api/uploads` takes (10 MiB); a larger one is refused with 413 and nothing of it is kept: before its body is read where its `Content-Length` says so (`UploadLimit`, docs/OPERATIONS.md), else as soon as the bytes read pass it |
| `UPLOAD_TYPES` | `()` | content types uploads may have beside the protocol's own (`text/plain`, `application/pdf`, `image/png`, `image/jpeg`, `image/gif`, `image/webp`), as a list or one comma-separated string; others are refused with 415. Whatever is allowed, only those four images are ever shown inline (messaging/files/kinds.py) |
| `UPLOADS_PENDING_PER_USER` | 20 | uploads one user may have that no message holds yet; one more is refused with 429 until one is posted or pruned |
| `UPLOADS_PENDING_BYTES_PER_USER` | 104857600 | bytes (100 MiB) of such uploads one user may have; likewise |
| `REACTION_EMOJI_MAX` | 20 | most distinct emoji one message may carry (`reaction.set`); another emoji past it is refused with `invalid`, while users may still add themselves to the emoji it has |
| `UPLOAD_RETENTION` | 86400 | seconds (a day) an upload may wait to be posted before `prune_uploads` removes it, row and file |
| `UPLOAD_STORAGE` | `"default"` | the alias in Django's `STORAGES` that keeps uploaded files (under `messaging/uploads/`) |
| `LOOP_DATABASE` | True | on PostgreSQL with psycopg 3, a batch's statement (`room.post`'s) and a receipt's run on the event loop's own connections (`messaging/core/gateway.py`), one per statement running at once and at most `max(2, DB_THREADS)`, instead of on a database thread; False: on a thread |
| `NODE` | None | this deployment's name among federated ones (`^[a-z][a-z0-9]{0,15}$`, docs/FEDERATION.md); None: federation off |
| `PEERS` | `""` | the peers: `name=base_url` entries, comma-separated, or a dict of name to base URL |
| `PEER_SECRETS` | `""` | one shared secret per peer: `name=secret` entries, comma-separated, or a dict |
| `FEDERATION_TIMEOUT` | 5.0 | seconds one request to a peer may take; a command on its room is then `unavailable` |
| `FEDERATION_BATCH` | 200 | most changes one push to a peer carries (and at most half of `FEDERATION_MAX_BODY` bytes) |
| `FEDERATION_MAX_BODY` | 2097152 | most bytes of a request a peer may send under `/federation/` (413 past it) |
| `FEDERATION_PEER_RATE` | 200.0 | requests per second one peer may keep up at one process, with a burst of twice that (429 past it) |
| `FEDERATION_POLL_INTERVAL` | 0.05 | seconds an idle pusher waits before it looks for new changes of shared rooms |
| `FEDERATION_FETCH_LIMIT` | 500 | most messages (and as many reaction counts and watermarks) one catch-up page holds |
| `FEDERATION_JOIN_WAIT` | 10.0 | seconds a first `room.join` of a remote room waits for its replica to reach the home's `rev` |
| `FEDERATION_BACKOFF_CAP` | 5.0 | most seconds between two attempts to push to a peer that fails (full jitter beneath it) |
| `LOOP_LAG_INTERVAL` | 0.1 | seconds between the samples of each event loop's lag (`messaging_loop_lag_seconds`, docs/OPERATIONS.md "Loop stalls"); 0 turns the sampler off |
| `GC_TIMING` | True | time every garbage collection of the process, by generation (`messaging_gc_pause_seconds`) |
| `STALL_LOG_AFTER` | 0.1 | seconds of a loop lag or a collection from which it is logged as a warning (`messaging.ops.loopwatch`); 0: never |
| `GC_FREEZE` | True | `gc.freeze()` once the app is ready: what exists at start-up (Django, the apps, the modules) is left out of every later collection, so a full collection walks only what the server made since |
| `GC_THRESHOLDS` | `"10000,5,2"` | the collector's thresholds, as `gc.set_threshold` takes them (a list or one comma-separated string), set once the app is ready: young collections rare, so none stops a busy loop (docs/OPERATIONS.md, "Loop stalls"); empty keeps Python's (700, 10, 10) |
| `EARLY_STATEMENT` | True | a batch's statement of posts (an `early_batch` type's, on PostgreSQL) goes to the database beside the batch's claims' Redis call instead of after it, unless the loop's last batch was mostly duplicates Redis knew (`messaging/core/pipeline.py`); False: after the claims

A host project may also give each option in the environment as
`MESSAGING_<KEY>` (see `options_from_environ`), e.g. `MESSAGING_CLAIM_LEASE=2`
or `MESSAGING_LOOP_DATABASE=0`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, fields
from functools import cached_property, lru_cache
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class MessagingSettings:
    DEDUP_WINDOW: int = 3600
    CLAIM_LEASE: float = 10.0
    IN_PROGRESS_WAIT: float = 2.0
    MAX_FRAME_BYTES: int = 65536
    REPLAY_LIMIT: int = 500
    RECENT_ON_JOIN: int = 50
    MEMBERS_ON_JOIN: int = 100
    STATES_PER_RECEIPT: int = 500
    BODY_MAX_CHARS: int = 4000
    BAD_FRAME_LIMIT: int = 10
    MAX_SEND_BUFFER: int = 1024 * 1024
    SERVER_ADAPTERS: bool = True
    DAPHNE_DIRECT_WRITES: bool = False
    INBOX_LIMIT: int = 200
    REPLY_BYTES_PER_TOKEN: int = 32 * 1024
    REDIS_URL: str | None = None
    REDIS_CLUSTER: bool = False
    REDIS_TIMEOUT: float = 0.5
    METRICS_TOKEN: str | None = None
    RECORD_RETENTION: int = 30 * 24 * 3600
    RECEIPT_TIMES_RETENTION: int = 90 * 24 * 3600
    GUEST_RETENTION: int = 30 * 24 * 3600
    RATE_BURST: int = 100
    RATE_PER_SECOND: float = 20.0
    USER_RATE_LIMIT: int = 600
    USER_RATE_WINDOW: float = 10.0
    SESSION_CHECK_INTERVAL: float = 5.0
    MEMBERSHIP_CHECK_INTERVAL: float = 30.0
    DB_THREADS: int = 0
    BATCH_SETTLE: int = 2
    RATE_WINDOW_KEYS: int = 10_000
    CONNECT_RATE: int = 120
    CONNECT_RATE_WINDOW: float = 60.0
    ROOMS_CREATED_PER_HOUR: int = 50
    ROOMS_CREATED_PER_ADDRESS_PER_HOUR: int = 500
    EMPTY_ROOM_RETENTION: int = 30 * 24 * 3600
    TRUSTED_PROXIES: tuple[str, ...] = ()
    ROOMS_PER_SOCKET: int = 200
    STREAM_PING_INTERVAL: float = 15.0
    SHARED_HEADER_PAIRS: int = 1000
    LOOP_DATABASE: bool = True
    EARLY_STATEMENT: bool = True
    EDIT_HISTORY_RETENTION: int = 0
    MODERATION_RETENTION: int = 365 * 24 * 3600
    ROOMS_LIST_LIMIT: int = 500
    ROOM_POLICY: str = "messaging.chat.policy.RoomPolicy"
    INVITES_PER_HOUR: int = 200
    REINVITE_AFTER: int = 7 * 24 * 3600
    INVITATIONS_LIST_LIMIT: int = 100
    TYPING_STATES: int = 10_000
    PRESENCE_TTL: float = 30.0
    PRESENCE_BEAT: float = 10.0
    PRESENCE_ROOMS: int = 200
    EVENTS_OUTBOX: bool = True
    EVENTS_URL: str | None = None
    EVENTS_STREAM: str = "messaging:events"
    CLAIM_STORE: str | None = None
    HUB: str | None = None
    EVENTS_SINK: str | None = None
    EVENTS_GROUP: str | None = None
    EVENTS_STREAM_MAXLEN: int = 1_000_000
    EVENTS_BATCH: int = 500
    EVENTS_PARTITIONS: int = 16
    EVENTS_POLL_INTERVAL: float = 0.2
    EVENTS_RETENTION: int = 7 * 24 * 3600
    EVENTS_MAX_ATTEMPTS: int = 5
    EVENTS_STUCK_AFTER: float = 60.0
    WEBHOOK_TIMEOUT: float = 10.0
    WEBHOOK_MAX_ATTEMPTS: int = 8
    WEBHOOK_BACKOFF: float = 2.0
    WEBHOOK_BACKOFF_CAP: float = 3600.0
    WEBHOOK_BATCH: int = 20
    WEBHOOKS_ALLOW_PRIVATE: bool = False
    MENTIONS_PER_MESSAGE: int = 20
    MENTION_EMAILS_PER_HOUR: int = 10
    MENTION_DIGEST_ITEMS: int = 50
    NOTIFICATION_RETENTION: int = 30 * 24 * 3600
    API_TOKENS_PER_USER: int = 20
    MAX_UPLOAD_BYTES: int = 10 * 1024 * 1024
    UPLOAD_TYPES: tuple[str, ...] = ()
    UPLOADS_PENDING_PER_USER: int = 20
    UPLOADS_PENDING_BYTES_PER_USER: int = 100 * 1024 * 1024
    UPLOAD_RETENTION: int = 24 * 3600
    REACTION_EMOJI_MAX: int = 20
    UPLOAD_STORAGE: str = "default"
    NODE: str | None = None
    PEERS: Any = ""
    PEER_SECRETS: Any = ""
    FEDERATION_TIMEOUT: float = 5.0
    FEDERATION_BATCH: int = 200
    FEDERATION_MAX_BODY: int = 2 * 1024 * 1024
    FEDERATION_PEER_RATE: float = 200.0
    FEDERATION_POLL_INTERVAL: float = 0.05
    FEDERATION_FETCH_LIMIT: int = 500
    FEDERATION_JOIN_WAIT: float = 10.0
    FEDERATION_BACKOFF_CAP: float = 5.0
    LOOP_LAG_INTERVAL: float = 0.1
    GC_TIMING: bool = True
    STALL_LOG_AFTER: float = 0.1
    GC_FREEZE: bool = True
    GC_THRESHOLDS: Any = "10000,5,2"

    @property
    def largest_frame(self) -> int:
        """The most bytes of one frame the server sends: every transport's send buffer sends one this
        large (messaging/transport/servers/); the answers that hold lists fit it (messaging/chat/sizes.py)."""
        return self.MAX_SEND_BUFFER

    def __post_init__(self) -> None:
        # Limits that refuse everything would fail every socket at connect: say so at startup.
        for name in (
            "RATE_BURST",
            "RATE_PER_SECOND",
            "USER_RATE_LIMIT",
            "USER_RATE_WINDOW",
            "MAX_SEND_BUFFER",
            "INBOX_LIMIT",
            "REPLY_BYTES_PER_TOKEN",
            "CONNECT_RATE_WINDOW",
            "STREAM_PING_INTERVAL",
            "EVENTS_STREAM_MAXLEN",
            "EVENTS_BATCH",
            "EVENTS_PARTITIONS",
            "EVENTS_POLL_INTERVAL",
            "EVENTS_RETENTION",
            "EVENTS_MAX_ATTEMPTS",
            "EVENTS_STUCK_AFTER",
            "WEBHOOK_TIMEOUT",
            "WEBHOOK_MAX_ATTEMPTS",
            "WEBHOOK_BACKOFF",
            "WEBHOOK_BACKOFF_CAP",
            "WEBHOOK_BATCH",
            "MENTIONS_PER_MESSAGE",
            "MENTION_EMAILS_PER_HOUR",
            "MENTION_DIGEST_ITEMS",
            "NOTIFICATION_RETENTION",
            "MAX_UPLOAD_BYTES",
            "UPLOADS_PENDING_PER_USER",
            "UPLOADS_PENDING_BYTES_PER_USER",
            "UPLOAD_RETENTION",
            "REACTION_EMOJI_MAX",
            "FEDERATION_TIMEOUT",
            "FEDERATION_BATCH",
            "FEDERATION_MAX_BODY",
            "FEDERATION_PEER_RATE",
            "FEDERATION_POLL_INTERVAL",
            "FEDERATION_FETCH_LIMIT",
            "FEDERATION_JOIN_WAIT",
            "FEDERATION_BACKOFF_CAP",
        ):
            if getattr(self, name) <= 0:
                raise ImproperlyConfigured(f"MESSAGING[{name!r}] must be positive")
        # A join ack always lists the joining member itself.
        for name in ("MEMBERS_ON_JOIN", "STATES_PER_RECEIPT", "ROOMS_LIST_LIMIT", "API_TOKENS_PER_USER"):
            if getattr(self, name) < 1:
                raise ImproperlyConfigured(f"MESSAGING[{name!r}] must be at least 1")
        for name in (
            "CONNECT_RATE",
            "ROOMS_CREATED_PER_HOUR",
            "ROOMS_CREATED_PER_ADDRESS_PER_HOUR",
            "ROOMS_PER_SOCKET",
            "EDIT_HISTORY_RETENTION",
            "REINVITE_AFTER",
            "INVITES_PER_HOUR",
            "SHARED_HEADER_PAIRS",
        ):
            if getattr(self, name) < 0:
                raise ImproperlyConfigured(f"MESSAGING[{name!r}] must be 0 (off) or positive")
        if self.INVITATIONS_LIST_LIMIT < 1:
            raise ImproperlyConfigured("MESSAGING['INVITATIONS_LIST_LIMIT'] must be at least 1")
        for name in ("TYPING_STATES", "PRESENCE_ROOMS"):
            if getattr(self, name) < 1:
                raise ImproperlyConfigured(f"MESSAGING[{name!r}] must be at least 1")
        # An entry lives PRESENCE_TTL - 1.5 * PRESENCE_BEAT past its beat: more than one beat.
        if not 0 < 2.5 * self.PRESENCE_BEAT < self.PRESENCE_TTL:
            raise ImproperlyConfigured("MESSAGING['PRESENCE_BEAT'] must be positive and below PRESENCE_TTL / 2.5")
        if self.RATE_WINDOW_KEYS < 2:
            raise ImproperlyConfigured("MESSAGING['RATE_WINDOW_KEYS'] must be at least 2")
        for name in ("SESSION_CHECK_INTERVAL", "MEMBERSHIP_CHECK_INTERVAL", "LOOP_LAG_INTERVAL", "STALL_LOG_AFTER"):
            if getattr(self, name) < 0:
                raise ImproperlyConfigured(f"MESSAGING[{name!r}] must be 0 (off) or positive")
        if self.EMPTY_ROOM_RETENTION <= 0:
            raise ImproperlyConfigured("MESSAGING['EMPTY_ROOM_RETENTION'] must be positive")
        from .files.kinds import upload_types
        from .ops.loopwatch import gc_thresholds

        object.__setattr__(self, "UPLOAD_TYPES", upload_types(self.UPLOAD_TYPES))
        object.__setattr__(self, "GC_THRESHOLDS", gc_thresholds(self.GC_THRESHOLDS))
        # Kept as the networks' canonical text: equal settings compare equal.
        object.__setattr__(self, "TRUSTED_PROXIES", tuple(str(n) for n in trusted_proxies(self.TRUSTED_PROXIES)))

    @cached_property
    def trusted_networks(self) -> tuple[IPNetwork, ...]:
        """`TRUSTED_PROXIES` as networks, made once per settings."""
        return trusted_proxies(self.TRUSTED_PROXIES)


def trusted_proxies(given: str | Iterable[str] | None) -> tuple[IPNetwork, ...]:
    """The networks of a `TRUSTED_PROXIES` value (a comma-separated string or a list of addresses and CIDR
    blocks; empty entries ignored). Anything else raises `ImproperlyConfigured` naming the entry: a proxy
    list that is quietly wrong either trusts a client's own header or counts every client as the proxy."""
    if given is None:
        return ()
    entries = given.split(",") if isinstance(given, str) else list(given)
    networks: list[IPNetwork] = []
    for entry in entries:
        if not isinstance(entry, str):
            raise ImproperlyConfigured(f"TRUSTED_PROXIES: {entry!r} is not an address or a CIDR block")
        text = entry.strip()
        if not text:
            continue
        try:
            # Strict: `10.0.0.7/8` (host bits set) is more likely a typo than a wish for 10.0.0.0/8.
            networks.append(ipaddress.ip_network(text, strict=True))
        except ValueError as exc:
            raise ImproperlyConfigured(f"TRUSTED_PROXIES: {text!r} is not an address or a CIDR block ({exc})") from None
    return tuple(networks)


@lru_cache(maxsize=1)
def get_settings() -> MessagingSettings:
    given = dict(getattr(django_settings, "MESSAGING", {}) or {})
    known = {f.name for f in fields(MessagingSettings)}
    unknown = set(given) - known
    if unknown:
        raise ImproperlyConfigured(f"MESSAGING has unknown keys: {', '.join(sorted(unknown))}")
    return MessagingSettings(**given)


_SWITCH = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def options_from_environ(environ: Mapping[str, str], prefix: str = "MESSAGING_") -> dict[str, Any]:
    """The options set as `<prefix><KEY>` in `environ`, typed like their defaults.

    For projects configured from the environment, and for server processes
    started by tests with short leases and low limits.
    """
    options: dict[str, Any] = {}
    for option in fields(MessagingSettings):
        text = environ.get(prefix + option.name)
        if text is None:
            continue
        default = option.default if option.default is not MISSING else None
        if isinstance(default, bool):
            # bool("0") is True: a switch is read as words.
            switch = _SWITCH.get(text.strip().lower())
            if switch is None:
                raise ImproperlyConfigured(f"{prefix}{option.name} must be 1 or 0 (true/false, on/off), not {text!r}")
            options[option.name] = switch
            continue
        try:
            options[option.name] = type(default)(text) if isinstance(default, (int, float)) else (text or None)
        except ValueError:
            raise ImproperlyConfigured(f"{prefix}{option.name} must be a number, not {text!r}") from None
    return options


def _reset(*, setting: str, **kwargs: object) -> None:
    if setting == "MESSAGING":
        get_settings.cache_clear()


setting_changed.connect(_reset)
