"""Tier 2 of the cache: Redis, shared by every app server of a graph.

A tier-1 miss asks Redis before the shard; a shard fill is offered to Redis
for the others. Writes invalidate: each applied leg bumps a version per key
in Redis, deletes the key's cached value and publishes the keys on the
graph's channel, so every other process's tier 1 drops them (its in-flight
fills of those keys turn stale). A fill is stored in Redis only if the key's
version is still the one read before the shard was (a Lua compare-and-set),
so a slow fill never writes back a value a newer write invalidated.
Home timelines are kept as their packed blob (`_timeline_list`); each leg
of deliveries invalidates its owners like a write does.

Everything is one pipelined round trip (redis-py: ~150 µs a call here, ~15
µs a call pipelined). Redis is a cache, not a dependency: every call is
guarded, and while Redis fails the graph reads tier 1 and the shards
(retrying Redis after a pause), returning no errors. Values expire after
`ttl` seconds and tier-1 entries after their max_age, which bounds how stale
anything can be after invalidations were lost in an outage.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from ._merge import ObjRow

log = logging.getLogger("assocdb.redis")

#: ("counts" | "prefix", (id1, atype)), ("object", id) or ("home", owner)
TicketKey = tuple[str, Any]

_CAS = """
local version = redis.call('GET', KEYS[2])
if (version == false and ARGV[1] == '') or version == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""
_PAUSE = 5.0  # seconds Redis is left alone after a failure


class RedisTier:
    """The shared tier, for one graph (`graph_id` keeps graphs apart on one Redis)."""

    def __init__(
        self,
        url: str,
        graph_id: str,
        ttl: float,
        on_invalidate: Callable[[list[TicketKey] | None], None],
    ) -> None:
        import redis

        self._errors = (redis.RedisError, OSError)
        self._redis = redis.Redis.from_url(url, socket_timeout=0.25, socket_connect_timeout=0.25)
        self._prefix = f"assocdb:{graph_id}:"
        self._channel = f"{self._prefix}invalidations"
        self._origin = uuid.uuid4().hex
        self._ttl_ms = int(ttl * 1000)
        self._cas = self._redis.register_script(_CAS)
        self._down_until = 0.0
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

    def get(self, key: TicketKey) -> tuple[Any, bytes | None, bool]:
        """(value or None, the key's version, found) — one round trip."""
        if not self._up():
            return None, None, False
        name = self._name(key)
        try:
            pipe = self._redis.pipeline(transaction=False)
            pipe.get(name)
            pipe.get("v:" + name)
            raw, version = pipe.execute()
        except self._errors as exc:
            self._failed(exc)
            return None, None, False
        if raw is None:
            self.misses += 1
            return None, version, False
        self.hits += 1
        return _decode(key, raw), version, True

    def put(self, key: TicketKey, value: Any, version: bytes | None) -> None:
        """Offer a shard fill, stored only if no write invalidated the key since `version`."""
        if not self._up():
            return
        name = self._name(key)
        try:
            self._cas(
                keys=[name, "v:" + name], args=[version or b"", _encode(key, value), self._ttl_ms]
            )
        except self._errors as exc:
            self._failed(exc)

    # -- writes -----------------------------------------------------------------------

    def invalidate(self, keys: Sequence[TicketKey]) -> None:
        """Bump the keys' versions, drop their values and tell every other process."""
        if not keys or not self._up():
            return
        try:
            pipe = self._redis.pipeline(transaction=False)
            for key in keys:
                name = self._name(key)
                pipe.incr("v:" + name)
                pipe.pexpire("v:" + name, self._ttl_ms * 10)
                pipe.delete(name)
            pipe.publish(self._channel, msgspec.msgpack.encode([self._origin, list(keys)]))
            pipe.execute()
        except self._errors as exc:
            self._failed(exc)

    def flush(self) -> None:
        """Forget everything cached for this graph, here and in every process (bulk loads)."""
        if not self._up():
            return
        try:
            for name in self._redis.scan_iter(match=self._prefix + "*", count=1000):
                self._redis.unlink(name)
            self._redis.publish(self._channel, msgspec.msgpack.encode([self._origin, "*"]))
        except self._errors as exc:
            self._failed(exc)

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
        while not self._stop.is_set():
            pubsub, self._pubsub = self._pubsub, None
            if pubsub is None:
                pubsub = self._subscribe()
                if pubsub is None:
                    self._stop.wait(_PAUSE)
                    continue
            try:
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=0.5)
                    if message is not None and message["type"] == "message":
                        self._received(message["data"])
            except self._errors as exc:
                self._failed(exc)
                self._stop.wait(_PAUSE)
            finally:
                pubsub.close()

    def _received(self, data: bytes) -> None:
        try:
            origin, keys = msgspec.msgpack.decode(data)
        except msgspec.DecodeError:
            log.warning("ignored an unreadable invalidation message")
            return
        if isinstance(keys, list) and keys[:1] == ["barrier"]:
            with self._barrier_seen:
                self._seen_barriers.add(keys[1])
                self._barrier_seen.notify_all()
        elif origin == self._origin:
            return  # our own writes updated our tier 1 in place
        elif keys == "*":
            self._on_invalidate(None)
        else:
            self._on_invalidate([(kind, _key(kind, k)) for kind, k in keys])

    # -- health ----------------------------------------------------------------------

    def _up(self) -> bool:
        return time.monotonic() >= self._down_until

    def _failed(self, exc: BaseException) -> None:
        self.failures += 1
        if self._up():
            log.warning(
                "Redis is failing (%s); using tier 1 and the shards for %.0f s", exc, _PAUSE
            )
        self._down_until = time.monotonic() + _PAUSE

    def _name(self, key: TicketKey) -> str:
        kind, k = key
        if kind == "object":
            return f"{self._prefix}o:{k}"
        if kind == "home":
            return f"{self._prefix}h:{k}"
        return f"{self._prefix}{kind[0]}:{k[0]}:{k[1]}"

    def close(self) -> None:
        self._stop.set()
        self._listener.join(timeout=2)
        self._redis.close()


def _encode(key: TicketKey, value: Any) -> bytes:
    if key[0] == "object":
        return msgspec.msgpack.encode([value])  # [None] is a cached "no such object"
    if key[0] == "counts":
        return msgspec.msgpack.encode(sorted(value.items()))
    if key[0] == "home":
        return bytes(value)  # the packed blob as it is
    return msgspec.msgpack.encode(value)


def _decode(key: TicketKey, raw: bytes) -> Any:
    if key[0] == "home":
        return raw
    value = msgspec.msgpack.decode(raw)
    if key[0] == "object":
        return None if value[0] is None else ObjRow(*value[0])
    if key[0] == "counts":
        return dict(map(tuple, value))
    return [tuple(row) for row in value]


def _key(kind: str, k: Any) -> Any:
    return k if kind in ("object", "home") else tuple(k)
