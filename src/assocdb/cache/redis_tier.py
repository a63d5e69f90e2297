"""Tier 2 of the cache: Redis, shared by every app server of a graph.

A tier-1 miss asks Redis before the shard; a shard fill is offered to Redis
for the others. Writes invalidate: each applied leg bumps a version per key
in Redis, deletes the key's cached value and publishes the keys on the
graph's channel, so every other process's tier 1 drops them (its in-flight
fills of those keys turn stale). A fill is stored in Redis only if the key's
version is still the one read before the shard was (a Lua compare-and-set),
so a slow fill never writes back a value a newer write invalidated. A flush
(a bulk load changed rows around the cache) bumps the graph's epoch, which
the compare-and-set checks too: versions of keys never written do not exist.
Home timelines are kept as their packed blob (`core.timeline_list`); each leg
of deliveries invalidates its owners like a write does.

Everything is one pipelined round trip (redis-py: ~150 µs a call here, ~15
µs a call pipelined). Redis is a cache, not a dependency: every call is
guarded, and while Redis fails the graph reads tier 1 and the shards
(retrying Redis after a pause), returning no errors.

An invalidation that cannot reach Redis (it hangs or is down) is not
dropped: its keys are kept (all of the graph's, past `MAX_UNSENT`), and once
the pause is over they are sent before this process reads Redis again, and by
the listener even if this process reads nothing. Otherwise Redis would keep
serving the value the write replaced until its `ttl` ran out, to the writing
process too once its own tier-1 entry aged. A listener that lost its
subscription drops its tier 1 when it is back (it may have missed messages).
So after an outage stale reads end within the pause plus tier 1's max_age.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from ..core.cachekeys import COUNTS, HOME, OBJECT, CacheKey
from ..core.extras import needs
from ..core.merge import ObjRow

log = logging.getLogger("assocdb.redis")


_CAS = """
local seen = (redis.call('GET', KEYS[3]) or '') .. '/' .. (redis.call('GET', KEYS[2]) or '')
if seen == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""
_PAUSE = 1.0  # seconds Redis is left alone after a failure
MAX_UNSENT = 100_000  # invalidations kept while Redis fails; beyond, the whole graph's


class RedisTier:
    """The shared tier, for one graph (`graph_id` keeps graphs apart on one Redis)."""

    def __init__(
        self,
        url: str,
        graph_id: str,
        ttl: float,
        on_invalidate: Callable[[list[CacheKey] | None], None],
    ) -> None:
        with needs("redis", "assocdb's Redis cache tier (CacheConfig.redis)"):
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry

        self._errors = (redis.RedisError, OSError)
        # A cache fails fast: no retries with backoff (redis-py's default turned
        # one call to a hung Redis into tens of seconds).
        self._redis = redis.Redis.from_url(
            url, socket_timeout=0.25, socket_connect_timeout=0.25, retry=Retry(NoBackoff(), 0)
        )
        self._prefix = f"assocdb:{graph_id}:"
        self._channel = f"{self._prefix}invalidations"
        self._epoch = f"e:{self._prefix}"  # bumped by each flush (not under the prefix it scans)
        self._origin = uuid.uuid4().hex
        self._ttl_ms = int(ttl * 1000)
        self._cas = self._redis.register_script(_CAS)
        self._down_until = 0.0
        # Invalidations Redis has not had yet, each with the number of the keep that
        # kept it last: a send forgets only what it sent (a key kept again during
        # the send, by a newer write, may have changed after the send reached Redis).
        self._unsent: dict[CacheKey, int] = {}
        self._unsent_all = 0  # too many of them: forget the whole graph's keys (keep's number)
        self._keeps = 0
        self._unsent_lock = threading.Lock()
        #: Held while they are sent: a reader that finds them unsent waits for the send.
        self._sending = threading.Lock()
        self._on_invalidate = on_invalidate
        self._stop = threading.Event()
        self.hits = self.misses = self.failures = 0
        self._seen_barriers: set[str] = set()
        self._barrier_seen = threading.Condition()
        self._pubsub = self._subscribe()  # before anything is read: no invalidation is missed
        self._listener = threading.Thread(target=self._listen, name="assocdb-redis", daemon=True)
        self._listener.start()

    def _subscribe(self) -> Any:
        """A subscription to the graph's channel, confirmed by Redis; None if Redis fails."""
        try:
            pubsub = self._redis.pubsub()  # type: ignore[no-untyped-call]
            pubsub.subscribe(self._channel)
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                message = pubsub.get_message(timeout=0.1)
                if message is not None and message["type"] == "subscribe":
                    return pubsub
        except self._errors as exc:
            self._failed(exc)
        return None

    # -- reads and fills ----------------------------------------------------------------

    def get(self, key: CacheKey) -> tuple[Any, bytes | None, bool]:
        """(value or None, the key's version, found) — one round trip. The version (the
        graph's epoch and the key's own) is what `put` of a fill read after this takes."""
        if not self._up():
            return None, None, False
        name = self._name(key)
        try:
            pipe = self._redis.pipeline(transaction=False)
            pipe.get(name)
            pipe.get("v:" + name)
            pipe.get(self._epoch)
            raw, own, epoch = pipe.execute()
        except self._errors as exc:
            self._failed(exc)
            return None, None, False
        version = (epoch or b"") + b"/" + (own or b"")
        if raw is None:
            self.misses += 1
            return None, version, False
        self.hits += 1
        return _decode(key, raw), version, True

    def put(self, key: CacheKey, value: Any, version: bytes | None) -> None:
        """Offer a shard fill, stored only if no write invalidated the key since `version`."""
        if not self._up():
            return
        name = self._name(key)
        try:
            self._cas(
                keys=[name, "v:" + name, self._epoch],
                args=[version or b"", _encode(key, value), self._ttl_ms],  # (b"": never stored)
            )
        except self._errors as exc:
            self._failed(exc)

    # -- writes -----------------------------------------------------------------------

    def invalidate(self, keys: Sequence[CacheKey]) -> None:
        """Bump the keys' versions, drop their values and tell every other process
        (now, or as soon as Redis answers again)."""
        if not keys:
            return
        if not self._up():
            self._keep_unsent(keys, everything=False)
            return
        try:
            self._send_invalidations(keys)
        except self._errors as exc:
            self._keep_unsent(keys, everything=False)
            self._failed(exc)

    def flush(self) -> None:
        """Forget everything cached for this graph, here and in every process (bulk loads)."""
        if not self._up():
            self._keep_unsent([], everything=True)
            return
        try:
            self._send_flush()
        except self._errors as exc:
            self._keep_unsent([], everything=True)
            self._failed(exc)

    def _send_invalidations(self, keys: Sequence[CacheKey]) -> None:
        pipe = self._redis.pipeline(transaction=False)
        for key in keys:
            name = self._name(key)
            pipe.incr("v:" + name)
            pipe.pexpire("v:" + name, self._ttl_ms * 10)
            pipe.delete(name)
        pipe.publish(self._channel, msgspec.msgpack.encode([self._origin, list(keys)]))
        pipe.execute()

    def _send_flush(self) -> None:
        self._redis.incr(self._epoch)  # first: a fill that read the shard before fails its put
        # (versions, "v:" + name, stay: they only go up.) One UNLINK per page of names,
        # not per name: readers wait for a flush Redis missed (`_send_unsent`), and a
        # round trip per cached key made that ~10 s per 100,000 keys.
        names: list[bytes] = []
        for name in self._redis.scan_iter(match=self._prefix + "*", count=1000):
            names.append(name)
            if len(names) == 1000:
                self._redis.unlink(*names)
                names = []
        if names:
            self._redis.unlink(*names)
        self._redis.publish(self._channel, msgspec.msgpack.encode([self._origin, "*"]))

    def _keep_unsent(self, keys: Sequence[CacheKey], everything: bool) -> None:
        with self._unsent_lock:
            self._keeps += 1
            self._unsent.update(dict.fromkeys(keys, self._keeps))
            if everything or len(self._unsent) > MAX_UNSENT:
                self._unsent_all = self._keeps
                self._unsent.clear()

    def _send_unsent(self) -> bool:
        """Deliver the invalidations Redis missed; False if it still fails.

        They stay unsent until Redis has them, and one thread sends them while
        the others wait: a reader that found them unsent must not read Redis
        while another thread's send is still on its way (it would read a value
        they invalidate, and keep it in its tier 1 too)."""
        with self._sending:
            if time.monotonic() < self._down_until:
                return False  # the send this one waited for failed: Redis is paused again
            with self._unsent_lock:
                keys, everything = dict(self._unsent), self._unsent_all
            if not keys and not everything:
                return True  # another thread sent them meanwhile
            try:
                if everything:
                    self._send_flush()
                else:
                    self._send_invalidations(list(keys))
            except self._errors as exc:
                self._failed(exc)
                return False
            with self._unsent_lock:  # what was kept again meanwhile stays, to be sent again
                unsent = self._unsent
                for key, keep in keys.items():
                    if unsent.get(key) == keep:
                        del unsent[key]
                if self._unsent_all == everything:
                    self._unsent_all = 0
        log.info("sent %s invalidations Redis missed", "all" if everything else len(keys))
        return True

    def barrier(self) -> str:
        """Publish a marker after everything this process published so far; its token."""
        token = uuid.uuid4().hex
        self._redis.publish(
            self._channel, msgspec.msgpack.encode([self._origin, ["barrier", token]])
        )
        return token

    def wait_for(self, token: str, timeout: float = 5.0) -> bool:
        """Wait until this process's listener has read the barrier `token`, and so every
        invalidation published before it (Redis delivers a channel's messages in order)."""
        with self._barrier_seen:
            return self._barrier_seen.wait_for(lambda: token in self._seen_barriers, timeout)

    def _listen(self) -> None:
        lost = False
        while not self._stop.is_set():
            pubsub, self._pubsub = self._pubsub, None
            if pubsub is None:
                pubsub = self._subscribe()
                if pubsub is None:
                    lost = True
                    self._stop.wait(_PAUSE)
                    continue
            if lost:  # messages published meanwhile are gone: trust nothing held
                self._on_invalidate(None)
                lost = False
            try:
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=0.2)
                    if message is not None and message["type"] == "message":
                        self._received(message["data"])
                    # (after a message too: on a busy channel there always is one)
                    if self._unsent or self._unsent_all:
                        self._up()  # sends them once the pause is over
            except self._errors as exc:
                self._failed(exc)
                lost = True
                self._stop.wait(_PAUSE)
            finally:
                pubsub.close()

    def _received(self, data: bytes) -> None:
        # Anything may come on the channel: a message this process cannot read is
        # skipped (an exception would end the listener, and with it every
        # invalidation this process hears of).
        try:
            origin, keys = msgspec.msgpack.decode(data)
            barrier = keys[1] if isinstance(keys, list) and keys[:1] == ["barrier"] else None
            if barrier is not None and not isinstance(barrier, str):
                raise TypeError("a barrier's token is a string")
            if barrier is None and keys != "*":
                keys = [(kind, _key(kind, k)) for kind, k in keys]
        except (msgspec.DecodeError, TypeError, ValueError, IndexError):
            log.warning("ignored an unreadable invalidation message")
            return
        if barrier is not None:
            with self._barrier_seen:
                self._seen_barriers.add(barrier)
                self._barrier_seen.notify_all()
        elif origin == self._origin:
            return  # our own writes updated our tier 1 in place
        else:
            self._on_invalidate(None if keys == "*" else keys)

    # -- health ----------------------------------------------------------------------

    def _up(self) -> bool:
        """May Redis be used now? After a failure, not before the pause is over and the
        invalidations it missed are delivered."""
        if time.monotonic() < self._down_until:
            return False
        if self._unsent or self._unsent_all:
            return self._send_unsent()
        return True

    def _failed(self, exc: BaseException) -> None:
        self.failures += 1
        if time.monotonic() >= self._down_until:  # (not _up(): that would retry Redis)
            log.warning(
                "Redis is failing (%s); using tier 1 and the shards for %.0f s", exc, _PAUSE
            )
        self._down_until = time.monotonic() + _PAUSE

    def _name(self, key: CacheKey) -> str:
        kind, k = key
        if kind == OBJECT:
            return f"{self._prefix}o:{k}"
        if kind == HOME:
            return f"{self._prefix}h:{k}"
        return f"{self._prefix}{kind[0]}:{k[0]}:{k[1]}"

    def close(self) -> None:
        self._stop.set()
        self._listener.join(timeout=2)
        self._redis.close()


def _encode(key: CacheKey, value: Any) -> bytes:
    if key[0] == OBJECT:
        return msgspec.msgpack.encode([value])  # [None] is a cached "no such object"
    if key[0] == COUNTS:
        return msgspec.msgpack.encode(sorted(value.items()))
    if key[0] == HOME:
        return bytes(value)  # the packed blob as it is
    return msgspec.msgpack.encode(value)


def _decode(key: CacheKey, raw: bytes) -> Any:
    if key[0] == HOME:
        return raw
    value = msgspec.msgpack.decode(raw)
    if key[0] == OBJECT:
        return None if value[0] is None else ObjRow(*value[0])
    if key[0] == COUNTS:
        return dict(map(tuple, value))
    if value and type(value[-1]) is bool:  # [rows, whole]
        rows, whole = value
    else:  # a list's rows as an older version stored them: not known to be whole
        rows, whole = value, False
    return [tuple(row) for row in rows], whole


def _key(kind: str, k: Any) -> Any:
    """A ticket key's key as published (msgpack made its tuple a list); TypeError if it
    is not one."""
    if kind in (OBJECT, HOME):
        if type(k) is not int:
            raise TypeError(f"an {kind} key is an id, got {type(k).__name__}")
        return k
    key = tuple(k)
    if not all(type(part) is int for part in key):
        raise TypeError(f"a list key is (id1, atype), got {k!r:.60}")
    return key
