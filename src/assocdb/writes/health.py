"""How failed writes are retried, and which shards are marked down meanwhile.

`RetryPolicy` says how long the error queue backs off and when a job becomes a
bad job; `ShardHealth` is a circuit breaker per shard: a shard that fails
repeatedly is marked down for a growing cool-down, so jobs for it go straight
to the error queue instead of waiting for its timeout each time.
"""

from __future__ import annotations

import random
import threading
import time

import msgspec

from ..core.errors import Unavailable


class RetryPolicy(msgspec.Struct, frozen=True):
    """How failed writes are retried.

    The error queue backs off `base * 2**retries` seconds, up to `cap`, with
    jitter; a job that fails `max_attempts` times for reasons other than
    availability becomes a bad job. A shard with `down_after` availability
    failures in a row is marked down for `down_for` seconds, doubling up to
    `down_max` while it keeps failing.
    """

    base: float = 0.05
    cap: float = 30.0
    max_attempts: int = 8
    down_after: int = 3
    down_for: float = 0.25
    down_max: float = 10.0
    claim_hold: float = 60.0  # how long a claimed job is kept from other retriers (while
    # its process lives: a dead one's claims are taken at once, `writes/owners.py`)

    def delay(self, retries: int, rnd: random.Random) -> float:
        backoff: float = min(self.cap, self.base * 2.0 ** min(retries, 30))
        return backoff * rnd.uniform(0.5, 1.0)


class ShardHealth:
    """A circuit breaker per shard: down after `threshold` availability failures in a row."""

    def __init__(
        self, threshold: int = 3, cooldown: float = 0.25, max_cooldown: float = 10.0
    ) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self.max_cooldown = max_cooldown
        self._failures: dict[int, int] = {}
        self._down_until: dict[int, float] = {}
        self._lock = threading.Lock()

    def check(self, shard: int) -> None:
        """Raise Unavailable at once while the shard cools down.

        When the cool-down ends, one caller is let through as a probe and the
        others keep failing fast until the probe reports back.
        """
        if shard not in self._down_until:
            return
        with self._lock:
            until = self._down_until.get(shard)
            if until is None:
                return
            now = time.monotonic()
            if now < until:
                raise Unavailable(f"shard {shard} is marked down; retrying in the background")
            self._down_until[shard] = now + self.cooldown  # this caller probes

    def failed(self, shard: int) -> None:
        with self._lock:
            n = self._failures[shard] = self._failures.get(shard, 0) + 1
            if n >= self.threshold:
                pause = min(self.max_cooldown, self.cooldown * 2.0 ** min(n - self.threshold, 30))
                self._down_until[shard] = time.monotonic() + pause

    def succeeded(self, shard: int) -> None:
        if shard in self._failures:
            with self._lock:
                self._failures.pop(shard, None)
                self._down_until.pop(shard, None)

    def down(self) -> list[int]:
        now = time.monotonic()
        return sorted(s for s, until in self._down_until.items() if until > now)

    def leg_failed(self, shard: int, exc: Unavailable) -> None:
        """Count a failed leg against its shard, unless it landed on some of the shard's
        replicas (`partial`, from `storage.shardmap`): then the shard works, one replica is down."""
        if not exc.details.get("partial"):
            self.failed(shard)
