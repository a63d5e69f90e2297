"""The change feed of a shard map: each shard's feed read from one of its replicas, with
positions that name their replica, so a reader survives a failover (`core.feedalign`).

Every member backend records its own shards' changes (`storage.sqlfeed`, in each apply's
transaction); a write reaches every replica (or is retried there by the journal), so each
replica's feed holds every change of the shard, in that replica's commit order. A read of
shard `s` after position `tag:p` reads the replica tagged `tag` after `p` while it answers;
once it does not (down, failed, or gone from the map), it reads the first other replica
that answers, after the newest alignment checkpoint that replica holds against the lost
one (or from its start: nothing was lost, all of it may come again). The rows returned
carry the reading replica's tag, so the cursor moves onto it and stays there.

Checkpoints are made by `align` (a thread, every `ALIGN_SECONDS` while the feed is on, in
every process that has the map open: a checkpoint is true whoever makes it): for every
ordered pair of a shard's replicas that both answer, it reads on in both feeds and stores
how far they agree on the replica that may have to take over. They are trimmed with the
feed. A replica is read only if it has weight (a write-only copy of a move holds no
history).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from functools import partial
from typing import TYPE_CHECKING

from ..core import feedalign
from ..core.errors import AssocdbError, FeedExpired, InvalidRequest, Unavailable
from ..core.feed import FeedRow
from .backend import Backend
from .sqlfeed import SQLFeed

if TYPE_CHECKING:
    from .shardmap import ShardMapBackend

log = logging.getLogger("assocdb.feed")
ALIGN_SECONDS = 0.5  # how often checkpoints move on
ALIGN_ROWS = 5000  # records of a replica aligned per pair and pass, at most
LOOKBACK = 1000  # records of the peer read before its checkpoint (replicas commit in
# slightly different orders)


class ReplicatedFeed:
    """The `ChangeFeed` of a `ShardMapBackend`; see the module doc."""

    checks_held = True  # `read` raises FeedExpired itself (positions name replicas)

    def __init__(self, backend: ShardMapBackend) -> None:
        self._b = backend
        self._stop = threading.Event()
        self._aligner: threading.Thread | None = None
        self._at: dict[tuple[int, str, str], tuple[int, int]] = {}  # (shard, me, peer): (P, Q)
        self._lock = threading.Lock()
        self._enabled = False
        self._later: set[str] = set()  # members down when the feed was turned on

    # -- the protocol ------------------------------------------------------------------

    @property
    def shards(self) -> int:
        return self._b.shards

    @property
    def on(self) -> bool:
        return self._enabled

    @property
    def missing(self) -> list[str]:
        """Members whose feed could not be turned on yet (down: the aligner retries)."""
        return sorted(self._later)

    @property
    def read_only(self) -> bool:
        return False

    @property
    def generation(self) -> int:
        return sum(
            self._member(name).generation for name in self._names() if name not in self._later
        )

    def enable(self) -> None:
        """Turn the feed on in every member that answers (each of its shards; the others
        when they are back, by the aligner), then align in a thread."""
        self._turn_on(self._names())
        self._enabled = True
        with self._lock:
            if self._aligner is None:
                self._aligner = threading.Thread(
                    target=self._align_loop, name="assocdb-feed-align", daemon=True
                )
                self._aligner.start()

    def _turn_on(self, names: list[str]) -> None:
        for name in names:
            try:
                self._b.call(name, lambda b: _sql(b).enable())
                self._later.discard(name)
            except Unavailable as exc:
                log.warning("the feed of member %s is turned on when it is back: %s", name, exc)
                self._later.add(name)

    def wait(self, seen: int, timeout: float) -> int:
        first = self._member(self._names()[0])  # (a reader also polls: any member's apply)
        first.wait(first.generation, timeout)
        return self.generation

    def wake(self) -> None:
        for name in self._names():
            with contextlib.suppress(AssocdbError):  # (a member that cannot open has none)
                self._member(name).wake()

    def close(self) -> None:
        """Stop aligning (the map is closing)."""
        self._stop.set()
        if self._aligner is not None and self._aligner is not threading.current_thread():
            self._aligner.join(timeout=5)

    def read(self, shard: int, after: int, limit: int) -> list[FeedRow]:
        """Up to `limit` records after `after`, tagged with the replica read (module doc);
        FeedExpired if that replica no longer holds the records after the cursor."""
        tag = feedalign.split(after)[0]
        names = self._readable(shard)
        if tag:  # the cursor's replica first, then the others
            names.sort(key=lambda name: feedalign.tag_of(name) != tag)
        failure: AssocdbError | None = None
        for name in names:
            try:
                read = partial(self._read_on, shard=shard, name=name, after=after, limit=limit)
                return self._b.call(name, read)
            except Unavailable as exc:
                failure = exc
        raise Unavailable(f"shard {shard}: no replica's feed could be read: {failure}")

    def _read_on(self, b: Backend, shard: int, name: str, after: int, limit: int) -> list[FeedRow]:
        feed, mine = _sql(b), feedalign.tag_of(name)
        tag, start = feedalign.split(after)
        if tag and tag != mine:
            found = feed.translate(shard, tag, start)
            start = 0 if found is None else found[1]
            log.warning("feed of shard %d: cursor moved to replica %s at %d", shard, name, start)
        rows = feed.read(shard, start, limit)
        if not rows or rows[0][0] != start + 1:
            oldest = feed.bounds(shard)[0]
            if start + 1 < oldest:
                held = [0] * self.shards
                held[shard] = feedalign.tagged(mine, oldest)
                raise FeedExpired(
                    f"the cursor is older than the feed's retention on shard {shard} "
                    f"(replica {name}); oldest held there: {held[shard]}",
                    oldest=held,
                )
        return [(feedalign.tagged(mine, row[0]), *row[1:]) for row in rows]

    def bounds(self, shard: int) -> tuple[int, int]:
        """(oldest held, last given) of the first replica that answers, tagged."""
        for name in self._readable(shard):
            try:
                oldest, last = self._b.call(name, lambda b: _sql(b).bounds(shard))
            except Unavailable:
                continue
            mine = feedalign.tag_of(name)
            return feedalign.tagged(mine, oldest), feedalign.tagged(mine, last)
        raise Unavailable(f"shard {shard}: no replica's feed could be read")

    def trim(self, shard: int, before: int, keep: int) -> int:
        """Trim every replica that answers (the others at a later pass) and drop the
        checkpoints that now translate to trimmed positions."""
        trimmed = 0
        for name in self._readable(shard):
            try:
                trimmed = max(trimmed, self._b.call(name, lambda b: _trim(b, shard, before, keep)))
            except Unavailable:
                continue
        return trimmed

    # -- alignment ---------------------------------------------------------------------

    def align(self) -> None:
        """Move every pair's checkpoint on as far as both replicas agree (module doc)."""
        for shard in range(self.shards):
            names = self._readable(shard)
            for me in names:
                for peer in names:
                    if me != peer and not self._stop.is_set():
                        try:
                            self._align(shard, me, peer)
                        except Unavailable:
                            continue  # (one is down: its pairs wait)

    def _align(self, shard: int, me: str, peer: str) -> None:
        peer_tag = feedalign.tag_of(peer)
        at = self._at.get((shard, me, peer))
        if at is None:
            stored = self._b.call(me, lambda b: _sql(b).translate(shard, peer_tag, feedalign.LOCAL))
            at = stored or (0, 0)
        mine = self._b.call(me, lambda b: _sql(b).read(shard, at[1], ALIGN_ROWS))
        if not mine:
            return
        start = max(0, at[0] - LOOKBACK)
        size = LOOKBACK + 4 * ALIGN_ROWS
        theirs = self._b.call(peer, lambda b: _sql(b).read(shard, start, size))
        moved = feedalign.align(mine, theirs, at)
        if moved[1] > at[1]:
            self._b.call(me, lambda b: _sql(b).checkpoint(shard, peer_tag, moved))
            self._at[(shard, me, peer)] = moved

    def _align_loop(self) -> None:
        while not self._stop.wait(ALIGN_SECONDS):
            try:
                if self._later:
                    self._turn_on(sorted(self._later))
                self.align()
            except AssocdbError as exc:
                log.warning("the change feed's alignment failed: %s", exc)

    # -- helpers -----------------------------------------------------------------------

    def _names(self) -> list[str]:
        """Every member that holds a readable replica, in the map's order."""
        seen: dict[str, None] = {}
        for shard in range(self.shards):
            seen.update(dict.fromkeys(self._readable(shard)))
        return list(seen)

    def _readable(self, shard: int) -> list[str]:
        return [r.backend for r in self._b.map.replicas[shard] if r.weight > 0]

    def _member(self, name: str) -> SQLFeed:
        return _sql(self._b.member(name))


def _sql(backend: Backend) -> SQLFeed:
    """A member's own feed (SQL members only)."""
    feed = backend.change_feed()
    if not isinstance(feed, SQLFeed):
        raise InvalidRequest("the change feed of a shard map needs SQL members")
    return feed


def _trim(backend: Backend, shard: int, before: int, keep: int) -> int:
    feed = _sql(backend)
    trimmed = feed.trim(shard, before, keep)
    feed.forget_checkpoints(shard, feed.bounds(shard)[0])
    return trimmed
