"""A hybrid logical clock: every write's `updated_at`, in µs since the epoch.

`now()` is the wall clock when it moves forward, and one more than the last
value handed out otherwise, so values are unique and strictly increasing within
a process even when the wall clock steps back (NTP) or two writes share a µs.
`observe()` folds in a timestamp seen elsewhere (a client-supplied
`updated_at`, a replayed job), so this process never hands out a value that
sorts before something it has already seen: causality survives clock skew
between app servers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .errors import InvalidRequest
from .ids import MAX_INT64

#: How far into the future a client-supplied `updated_at` may be. A timestamp
#: from far ahead would win every later write to that row until the wall clock
#: caught up, so it is refused rather than silently stored.
MAX_FUTURE_US = 300 * 1_000_000


class HybridClock:
    """Strictly increasing µs timestamps that never run behind what was observed.

    >>> clock = HybridClock()
    >>> a = clock.now(); b = clock.now(); a < b
    True
    """

    def __init__(self, wall_ns: Callable[[], int] = time.time_ns) -> None:
        self._wall_ns = wall_ns
        self._last = 0
        self._lock = threading.Lock()

    def now(self) -> int:
        """Return a timestamp greater than every one returned or observed before."""
        wall = self._wall_ns() // 1000
        with self._lock:
            self._last = max(wall, self._last + 1)
            return self._last

    def wall_ms(self) -> int:
        """The wall clock in ms, the unit of an edge's time (expiry is judged by it)."""
        return self._wall_ns() // 1_000_000

    def observe(self, timestamp: int) -> None:
        """Make every later `now()` greater than `timestamp`."""
        with self._lock:
            self._last = max(self._last, timestamp)

    def accept(self, timestamp: object) -> int:
        """Validate a client-supplied `updated_at`, observe it and return it.

        Raises InvalidRequest for a non-integer, a non-positive value, or one more
        than MAX_FUTURE_US ahead of this clock.
        """
        if type(timestamp) is not int or not 0 < timestamp <= MAX_INT64:
            raise InvalidRequest(
                f"updated_at must be a positive 64-bit integer (µs since the epoch), "
                f"got {timestamp!r}",
                updated_at=repr(timestamp),
            )
        horizon = self._wall_ns() // 1000 + MAX_FUTURE_US
        if timestamp > horizon:
            raise InvalidRequest(
                f"updated_at {timestamp} is more than {MAX_FUTURE_US // 1_000_000} s "
                f"in the future; it would win every later write to this row",
                updated_at=timestamp,
            )
        self.observe(timestamp)
        return timestamp
