"""Expiring edges: an association type with a `ttl` hides each edge `ttl` after its time.

An edge's *time* is its sort key (`Assoc.time`, ms since the epoch): the time
of its creation by default, or the time its writer gave it. An edge of a type
with a ttl is visible while `time > now - ttl` (both in ms) and invisible from
`time + ttl` on, whatever its state; an edge given a time in the future lives
that much longer, one given a time far in the past is born expired. Lists are
ordered by time, newest first, so the expired edges of a list are always its
oldest tail: every read keeps the edges with `time >= lowest_visible(...)`,
which is a bound on the time index the lists are already read by, and a count
is the stored count minus the count of that tail (`api.ttl_reads`).

The type's ttl is read at every read, so changing it acts at once on every edge
the cleaner has not yet removed: a longer ttl shows edges a shorter one hid, a
shorter one hides more; removing it (ttl None) shows them all again. Edges the
cleaner (`api.expiry`) has already removed stay removed.
"""

from __future__ import annotations

import math
from datetime import timedelta

from .errors import SchemaError

#: The longest ttl: 100 years, in seconds (a time plus it still fits in ms).
MAX_TTL = 100 * 365 * 86400.0
#: The shortest ttl: 1 ms, the resolution of an edge's time.
MIN_TTL = 0.001


def check_ttl(ttl: object) -> float | None:
    """A ttl in seconds (None: never expires), from seconds or a timedelta, or SchemaError.

    >>> check_ttl(timedelta(days=1))
    86400.0
    """
    if ttl is None:
        return None
    if isinstance(ttl, timedelta):
        ttl = ttl.total_seconds()
    if type(ttl) not in (int, float) or not math.isfinite(ttl):  # type: ignore[arg-type]
        raise SchemaError(f"ttl must be a number of seconds or a timedelta, got {ttl!r}")
    seconds = float(ttl)  # type: ignore[arg-type]
    if not MIN_TTL <= seconds <= MAX_TTL:
        raise SchemaError(f"ttl must be from {MIN_TTL} s to {MAX_TTL:,.0f} s, got {ttl!r}")
    return seconds


def ttl_ms(ttl: float) -> int:
    """The ttl in ms (the unit of an edge's time), at least 1."""
    return max(1, round(ttl * 1000))


def lowest_visible(now_ms: int, ttl: float) -> int:
    """The oldest time an edge of a type with this ttl may have and still be visible."""
    return now_ms - ttl_ms(ttl) + 1
