"""Growing a list's cached prefix by the edges it lacks at its tail (issue 43).

A prefix filled for reads of the newest `n` edges holds exactly `n` (`fill_size`);
a delete of one of them leaves it one short, and the next such read found it too
short and filled it again, whole: on LinkBench, whose hottest lists run past
10,000 links and are read 10,000 at a time, those refills were 132 reads of
~10 ms a run, most of the time its reads took (`docs/operations.md`). `grow`
reads only the edges past the prefix's last one instead, as many as it lacks
(plus one, to learn whether the list ends there), and appends them.

It runs under a fill's ticket, as `Cache._fill` does: a write of the list that
began before the read (in `Cache._writing`) or during it (`Cache._stale`) makes
the ticket stale, and nothing is appended; nor if the entry or its prefix
changed meanwhile. The prefix's edges and their order are unchanged by an
append at the tail, so the answers the entry keeps (of its newest edges) stay
right.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from time import perf_counter
from typing import TYPE_CHECKING

from ..core.cachekeys import PREFIX
from ..core.scans import ListRow
from . import offers
from .admission import Fill as _Fill
from .entries import ListKey

if TYPE_CHECKING:
    from .tier1 import Cache

#: The most edges a tail read appends; a prefix lacking more is filled again whole.
MOST = 256

#: The rows of a list past `key` (its (time, id2)), oldest-ward, at most `n`.
Tail = Callable[[tuple[int, int], int], Sequence[ListRow]]


def grow(cache: Cache, key: ListKey, tail: Tail, want: int) -> bool:
    """Append to the list's cached prefix the edges past its last, up to `want` in all;
    whether it did (False: nothing changed; fill it as usual)."""
    ticket_key = (PREFIX, key)
    with cache._lock:
        entry = cache._lists.get(key)
        prefix = None if entry is None else entry.prefix
        if prefix is None or entry is None or cache.tier2 is not None:
            return False
        last, lacking = prefix.last(), want - len(prefix)
        if last is None or not 0 < lacking <= MOST or ticket_key in cache._fills:
            return False
        ticket = cache._fills[ticket_key] = _Fill()
        ticket.stale = ticket_key in cache._writing  # (see `Cache._fill`)
    began = perf_counter()
    try:
        rows = tail(last, lacking + 1)
    except BaseException:
        offers.abandon(cache, key, ticket)  # (its waiters read for themselves)
        raise
    try:
        with cache._lock:
            del cache._fills[ticket_key]
            cache.fills += 1
            cache.fill_seconds += perf_counter() - began
            if ticket.stale:
                cache.stale_fills += 1
                return False
            if cache._lists.get(key) is not entry or entry.prefix is not prefix:
                return False
            if prefix.last() != last:
                return False
            cache.bytes -= entry.nbytes
            for id2, time, stamp, data in rows[:lacking]:
                prefix.insert((time, id2, stamp))
                if data is not None:
                    entry.set_data(id2, data)
            if len(rows) <= lacking:  # the list ends here
                entry.complete = len(prefix) <= cache.keeps
            cache.bytes += entry.nbytes
            cache._evict()
            return True
    finally:
        ticket.done.release()
