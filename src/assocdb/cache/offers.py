"""A read of a list's newest edges as the list's fill (issue 43).

A list's fill on its admitted miss (`Cache.listed`) read the shard, packed
the rows, then answered the read from them: with its ticket, locks and the
answer's bookkeeping it cost ~2x an uncached read, and fills were the cache's
p99 on popularity-weighted traffic. When a read asks for the newest edges of
a list with no prefix cached, it now reads them itself, as an uncached read
does (with as many rows as a fill reads, `fill_size`), answers from its own
rows, and offers them to the cache (`offer`), which installs them if this
miss admits the list and no write of it began meanwhile. Concurrent misses
still share one read: the read holds the fill's ticket (`claim`), which a
write marks stale and the others wait on.

A read that asks for LONG edges or more (`long_read`) takes that way on its
list's first miss too, and a read that found LONG or more is installed
whatever the doorkeeper says, and whether list fills are open or closed
(`cache.payback`: long fills are outside its verdict): such a read costs
milliseconds (LinkBench asks for up to 10,000 links a read), so its list's
second read pays the packing many times over. Behind the doorkeeper each long
list was read whole twice before its first hit: on LinkBench 136 misses of
lists of 1,000+ links took 1,496 ms of its `get_link_list`s' 1,545.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.cachekeys import LIST, PREFIX
from ..core.scans import ListRow
from .admission import Fill as _Fill
from .entries import ListKey
from .payback import LONG  # edges a read asks for or finds: filled on the list's first miss

if TYPE_CHECKING:
    from .tier1 import Cache


def unfilled(cache: Cache, key: ListKey) -> bool:
    """Whether the list has no prefix cached (and is not known empty): a read of its
    newest edges is then its fill (`claim`, `offer`). No lock: `offer` looks again.
    (With tier 2, fills go through `Cache.listed`, which asks it first.)"""
    entry = cache._lists.get(key)
    fill = entry is None or (entry.prefix is None and not entry.empty())
    return fill and cache.tier2 is None


def long_read(need: int | None) -> bool:
    """Whether a read of `need` edges of a list is long (None: unknown, not long): its
    first miss fills the list (the newest edges' read offered as the fill: `claim`,
    `offer`), not passed by the doorkeeper, whether list fills are open or not."""
    return need is not None and need >= LONG


def claim(cache: Cache, key: ListKey) -> _Fill | None:
    """The ticket of a fill of the list's prefix by the read that asks (pass it to
    `offer`, or to `abandon` if the read fails), or None when another fill of it is
    in flight: this waited for it (concurrent misses share one fill), and reads
    through `listed`."""
    ticket_key = (PREFIX, key)
    cache.hot.seen((LIST, *key))  # (as `listed` counts the reads it fills)
    with cache._lock:
        ongoing = cache._fills.get(ticket_key)
        if ongoing is None:
            ticket = cache._fills[ticket_key] = _Fill()
            ticket.stale = ticket_key in cache._writing  # (see `_fill`)
            return ticket
    ongoing.wait()
    return None


def offer(
    cache: Cache, key: ListKey, rows: Sequence[ListRow], whole: bool, ticket: _Fill, took: float
) -> dict[Any, Any] | None:
    """A miss of a list's newest edges that read them from the shard itself (`rows`,
    newest first; `whole`: all of them; `took` seconds) as an uncached read does,
    under the `claim`ed ticket: installed as the list's prefix if it read LONG edges
    or more, or this miss admits it (`_admit`) while short lists' fills are open
    (`cache.payback`), and no write of it began meanwhile (the ticket is not stale). The
    read answers from its own rows: a fill costs packing them, not a second pass
    through the cache and an answer decoded from the prefix (issue 43: a fill cost
    ~2x an uncached read, and fills were the cache's p99).

    The installed entry's answers (empty) if this installed it, else None: pass them
    to `Cache.keep` with the read's answer, so the list's next read is a kept answer's
    hit, not a decode of the prefix just packed (which cost ~2x an uncached read)."""
    try:
        with cache._lock:
            del cache._fills[(PREFIX, key)]
            entry = cache._lists.get(key)
            if entry is not None and entry.prefix is not None:
                return None  # filled meanwhile
            if len(rows) < LONG and not (cache.payback.open and cache._admit((PREFIX, key))):
                return None  # not admitted (yet), or short lists' fills are closed
            cache.fills += 1
            cache.fill_seconds += took
            if ticket.stale:
                cache.stale_fills += 1
                return None
            return cache._install((PREFIX, key), (rows, whole))
    finally:
        ticket.done.release()


def abandon(cache: Cache, key: ListKey, ticket: _Fill) -> None:
    """The read of a `claim`ed fill failed: its waiters read for themselves."""
    with cache._lock:
        del cache._fills[(PREFIX, key)]
    ticket.stale = True
    ticket.done.release()
