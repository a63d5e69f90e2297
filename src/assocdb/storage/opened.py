"""A shard transaction opened *before* its rows are known (issue 37).

`storage.prepared` opens a shard's transaction once a batch's rows are
resolved; resolving them first read the stored rows they depend on (a
re-add keeps the live edge's time; a list's node state dominates), with a
statement of its own per shard and kind, outside any transaction. Here the
transaction is opened first: `open_reading` takes the shard's write turn,
BEGINs, and reads in **one statement** the stored rows of every key the batch
writes on the shard *and* the node states of its lists (and, while the change
feed is not known on there, its `feed` row, which `fill` would otherwise read
with a statement of its own: `sqlfeed.record`'s `seen`). The writer resolves
its operations against those rows, journals them, and meanwhile `fill`s the
transaction: the merge uses the rows already read (no second read), then the
edges' and counts' upserts, as `SQLBackend._apply`. The result is an ordinary
`Prepared`, committed once the journal's fsync returned (or rolled back).

The rows are read holding the shard's write turn, so nothing changes them
between the read a write is resolved against and its apply (before, a write
of another process could land in between, and the later `updated_at` won as
a whole: that stays the rule either way).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from itertools import chain
from operator import itemgetter

from ..core.merge import Changes, EdgeKey, EdgeRow, EdgeTuple, NodeRow, merge_edges
from . import sqlfeed as _feed
from .dialect import Session
from .prepared import Held, Prepared, Turn
from .sql import SQLBackend
from .sqltext import EDGES, marks

__all__ = ["Opened", "open_reading", "read_stored"]

_NODE = itemgetter(0)  # a list's node
_NEW = itemgetter(1)  # a change's new row
#: Keys read by the one combined statement (3 parameters each, under SQLite's 999).
_MAX_KEYS = 250
#: The change feed's `feed` row as the combined statement's last arm (8 columns).
_SEQ_ARM = _feed.SEQ_ARM.format(nulls=", NULL" * 6)


class Opened:
    """A shard transaction holding its write turn, and the stored rows it read: `fill`
    it (once) with the rows to write, or `rollback` it."""

    __slots__ = ("_backend", "_held", "_session", "current", "feed", "shard", "states")

    def __init__(
        self,
        backend: SQLBackend,
        shard: int,
        held: Held,
        session: Session,
        current: dict[EdgeKey, EdgeTuple],
        states: dict[tuple[int, int], NodeRow],
        feed: bool | None = None,
    ) -> None:
        self._backend = backend
        self._held = held
        self._session = session
        self.shard = shard
        #: The stored rows of the keys asked for (those that exist), and the node
        #: states of the lists asked for (those that have one).
        self.current = current
        self.states = states
        #: Whether the read found the shard's change feed on (None: not read).
        self.feed = feed

    def fill(self, edges: Sequence[EdgeTuple]) -> Prepared:
        """Merge `edges` (of the keys read) into the rows read, store what changed; the
        open transaction to commit. On failure it is rolled back."""
        b, session, shard = self._backend, self._session, self.shard
        try:
            changed, deltas = merge_edges(self.current, edges)
            b._store(session, shard, b._upsert_edge, list(map(_NEW, changed)))
            b._store(session, shard, b._add_count, [(*k, n) for k, n in deltas.items()])
            changes = Changes(changed, [], [])
            if self.feed is not False:  # (read, and not found: nothing to record)
                _feed.record(b, session, shard, changes, self.feed)
        except BaseException:
            self.rollback()
            raise
        return Prepared(b, shard, self._held, session, changes)

    def rollback(self) -> None:
        """Undo the transaction (it wrote nothing yet) and give the write turn back."""
        try:
            self._backend._rollback(self._session, self.shard)
        finally:
            self._held.close()


def open_reading(
    backend: SQLBackend, shard: int, keys: Sequence[EdgeKey], lists: Sequence[tuple[int, int]]
) -> Opened:
    """BEGIN on `shard` and read the stored rows of `keys` and the node states of
    `lists` (see the module doc). Raises what the engine raised, with nothing left open."""
    writing = backend._writing(shard, False)  # (`held_turn`, inlined: a call a leg less)
    held = writing if isinstance(writing, Held) else Turn(writing)
    session = held.enter()
    try:
        backend._run(session, shard, backend.dialect.begin)
        current, states, feed = _read(backend, session, shard, sorted(set(keys)), lists)
    except BaseException:
        backend._rollback(session, shard)
        held.close()
        raise
    return Opened(backend, shard, held, session, current, states, feed)


def read_stored(
    backend: SQLBackend, shard: int, keys: Sequence[EdgeKey], lists: Sequence[tuple[int, int]]
) -> tuple[dict[EdgeKey, EdgeTuple], dict[tuple[int, int], NodeRow]]:
    """The stored rows of `keys` and the node states of `lists` on `shard`, read outside
    any transaction in one statement (when they fit in one): what resolving writes
    before journaling reads (`writes.current`)."""
    current, states, _ = _read(backend, None, shard, sorted(set(keys)), lists)
    return current, states


@functools.lru_cache(maxsize=1024)
def _combined(by_key: str, keys: int, nodes: int, feed: bool) -> str:
    """The one statement reading `keys` edge rows, the node states of `nodes` nodes and
    (with `feed`) the change feed's `feed` row (a template: `{s}` is the shard)."""
    match = " OR ".join(["(id1 = ? AND atype = ? AND id2 = ?)"] * keys)
    sql = f"SELECT 0, {EDGES} FROM {{s}}.edges{by_key} WHERE {match}"
    if nodes:
        # A node row padded to an edge row's width, told apart by its first column.
        sql += (
            " UNION ALL SELECT 1, node, atype, state, updated_at, NULL, NULL, NULL"
            f" FROM {{s}}.node_states WHERE node IN ({marks(nodes)})"
        )
    return sql + _SEQ_ARM if feed else sql


def _read(
    b: SQLBackend,
    session: Session | None,
    shard: int,
    keys: list[EdgeKey],
    lists: Sequence[tuple[int, int]],
) -> tuple[dict[EdgeKey, EdgeTuple], dict[tuple[int, int], NodeRow], bool | None]:
    """The stored rows of `keys` and node states of `lists` (in `session`'s transaction,
    or on their own): one statement when they fit in one, else the backend's own reads.
    In a transaction the one statement also reads the shard's change feed `feed` row
    (unless the feed is known on): whether it was found (None: not read)."""
    wanted = set(lists)
    nodes = sorted(set(map(_NODE, wanted)))
    if not keys or len(keys) > _MAX_KEYS or len(nodes) > _MAX_KEYS:
        stored: dict[EdgeKey, EdgeTuple]
        if session is None:
            stored = {row[:3]: row for row in b.edges_at(shard, keys)} if keys else {}
        else:
            stored = b._current_edges(session, shard, keys)  # type: ignore[arg-type]
        return stored, b._node_states(session, shard, sorted(wanted)) if wanted else {}, None
    params: list[int] = list(chain.from_iterable(keys))
    if nodes:
        params += nodes
    feed: bool | None = None
    if session is not None and not b.change_feed().known_on(shard):
        feed = False
    # (The same template object each time: `_q` finds it by a hash already computed, and
    # the driver's statement cache by identity, rather than a new string every read.)
    sql = b._q(_combined(b._by_key, len(keys), len(nodes), feed is not None), shard)
    current: dict[EdgeKey, EdgeTuple] = {}
    states: dict[tuple[int, int], NodeRow] = {}
    found = b._query(shard, sql, params) if session is None else b._run(session, shard, sql, params)
    for kind, *row in found:
        if kind == 0:
            current[(row[0], row[1], row[2])] = EdgeRow(*row)
        elif kind == 2:
            feed = True
        elif (row[0], row[1]) in wanted:
            states[(row[0], row[1])] = NodeRow(*row[:4])
    return current, states, feed
