"""The request generator: LinkBench's `LinkBenchRequest.oneRequest`, without the I/O.

`RequestGenerator.next()` returns one `Op`. It draws from its own
`java.util.Random` exactly what the reference draws, in the same order: one
`nextDouble` picks the operation from the cumulative mix, then the
operation's ids, link type, sizes and payload. Link writes and reads pick id1
from `AccessModel`, id2 from `Id2Chooser`; node operations pick from the node
distributions.

The only state that depends on answers is the *history* of long lists: when
a link-list read returns a full page (10,000 links), the generator remembers
the oldest link, and 0.3% of later link-list reads page back from there
(time <= that link's time, skipping one row, as the reference does). The
runner reports each link-list answer with `observe_list`. Without a store
(`observe_list` never called) the history stays empty and every link-list
read is a fresh one, as in the reference when no list is that long.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass

from .access import AccessModel
from .config import (
    ADD_LINK,
    ADD_NODE,
    COUNT_LINK,
    DEFAULT_NODE_TYPE,
    DELETE_LINK,
    DELETE_NODE,
    GET_LINKS_LIST,
    GET_NODE,
    MAX_LINK_DATA,
    MAX_NODE_DATA,
    MULTIGET_LINK,
    OPERATIONS,
    RANGE_LIMIT,
    UPDATE_LINK,
    UPDATE_NODE,
    Datagen,
    Workload,
)
from .datagen import MotifData
from .distributions import Geometric, LogNormal
from .id2chooser import P_ADD_EXIST, P_DELETE_EXIST, P_GET_EXIST, P_UPDATE_EXIST, Id2Chooser
from .jrandom import JavaRandom

HISTORY_LIMIT = 2048  # listTailHistoryLimit, hard-coded in the reference
MAX_TIME = (1 << 63) - 1


class Op:
    """One request. Fields that an operation does not use stay at their defaults."""

    __slots__ = (
        "data",
        "history",
        "id1",
        "id2",
        "id2s",
        "kind",
        "link_type",
        "max_time",
        "offset",
        "time",
        "version",
    )

    def __init__(self, kind: str, id1: int = 0, link_type: int = 0, id2: int = 0) -> None:
        self.kind = kind
        self.id1 = id1  # the node id for node operations
        self.link_type = link_type  # the node type for node operations
        self.id2 = id2
        self.id2s: list[int] = []
        self.data = b""
        self.time = 0  # ms for links, s for nodes
        self.version = 0
        self.max_time = MAX_TIME  # link-list reads: time <= max_time ...
        self.offset = 0  # ... skipping `offset` rows
        self.history = -1  # the history slot a paging read came from

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"Op({fields})"


@dataclass
class _Tail:
    """The oldest link a full page returned: where the next page starts."""

    id1: int
    link_type: int
    time: int


class Shared:
    """What every requester of one workload shares: immutable and costly to build."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self.access = AccessModel.build(workload)
        self.id2s = Id2Chooser(workload)
        mix = workload.mix
        acc, bounds = 0.0, []
        for name in OPERATIONS:  # the reference's order of cumulative percentages
            acc += mix[name]
            bounds.append((acc, name))
        self.bounds = bounds


class RequestGenerator:
    """One requester's stream of operations; not thread-safe (one per thread)."""

    def __init__(self, shared: Shared, rng: JavaRandom) -> None:
        w = shared.workload
        self.shared, self.rng = shared, rng
        self.link_size = LogNormal(0, MAX_LINK_DATA, w.link_datasize, w.link_datasize_sigma)
        self.node_size = LogNormal(0, MAX_NODE_DATA, w.node_datasize, w.node_datasize_sigma)
        self.link_add = _motif(w, w.link_add_datagen)
        self.link_up = _motif(w, w.link_up_datagen)
        self.node_add = _motif(w, w.node_add_datagen)
        self.node_up = _motif(w, w.node_up_datagen)
        self.multiget = Geometric(
            w.multiget_min, w.multiget_max, w.multiget_prob, from_min=not w.quirks
        )
        self.p_history = w.getlinklist_history / 100
        self.history: list[_Tail] = []
        self.history_index: dict[tuple[int, int], int] = {}
        self._choices = [(bound, getattr(self, "_" + name)) for bound, name in shared.bounds]

    def next(self) -> Op:
        """The next operation of the stream."""
        rng = self.rng
        r = rng.next_double() * 100.0
        for bound, make in self._choices:
            if r <= bound:
                return make(rng)  # type: ignore[no-any-return]
        raise RuntimeError("the operation mix does not reach 100%")

    # -- link operations ---------------------------------------------------------

    def _link_write(self, kind: str, rng: JavaRandom, p_existing: float) -> Op:
        shared = self.shared
        id1 = shared.access.link_writes.next_id(rng)
        link_type = shared.id2s.random_link_type(rng)
        return Op(kind, id1, link_type, shared.id2s.choose_for_op(rng, id1, link_type, p_existing))

    def _add_link(self, rng: JavaRandom) -> Op:
        op = self._link_write(ADD_LINK, rng, P_ADD_EXIST)
        op.time = _now_ms()
        op.data = self.link_add.fill(rng, self.link_size.choose(rng))
        return op

    def _delete_link(self, rng: JavaRandom) -> Op:
        return self._link_write(DELETE_LINK, rng, P_DELETE_EXIST)

    def _update_link(self, rng: JavaRandom) -> Op:
        op = self._link_write(UPDATE_LINK, rng, P_UPDATE_EXIST)
        op.time = _now_ms()
        op.data = self.link_up.fill(rng, self.link_size.choose(rng))
        return op

    def _link_read(self, kind: str, rng: JavaRandom) -> Op:
        id1 = self.shared.access.link_reads.next_id(rng)
        return Op(kind, id1, self.shared.id2s.random_link_type(rng))

    def _count_link(self, rng: JavaRandom) -> Op:
        return self._link_read(COUNT_LINK, rng)

    def _get_link(self, rng: JavaRandom) -> Op:
        op = self._link_read(MULTIGET_LINK, rng)
        n = self.multiget.choose(rng)
        op.id2s = self.shared.id2s.choose_multiple_for_op(rng, op.id1, op.link_type, n, P_GET_EXIST)
        return op

    def _get_link_list(self, rng: JavaRandom) -> Op:
        # The reference draws the coin before it looks at the history.
        if rng.next_double() < self.p_history and self.history:
            choice = rng.next_int_bounded(len(self.history))
            tail = self.history[choice]
            op = Op(GET_LINKS_LIST, tail.id1, tail.link_type)
            op.max_time, op.offset, op.history = tail.time, 1, choice
            return op
        return self._link_read(GET_LINKS_LIST, rng)

    def observe_list(self, op: Op, count: int, last_time: int | None) -> None:
        """Feed back a link-list answer: `count` links, the oldest with `last_time`."""
        if op.history >= 0:
            if count == RANGE_LIMIT and last_time is not None:
                self.history[op.history] = _Tail(op.id1, op.link_type, last_time)
            else:
                self._remove_tail(op.history, None)
        elif count >= RANGE_LIMIT and last_time is not None:
            self._add_tail(_Tail(op.id1, op.link_type, last_time))

    def _add_tail(self, tail: _Tail) -> None:
        key = (tail.id1, tail.link_type)
        if key in self.history_index:
            return
        if len(self.history) < HISTORY_LIMIT:
            self.history.append(tail)
            self.history_index[key] = len(self.history) - 1
        else:
            self._remove_tail(self.rng.next_int_bounded(len(self.history)), tail)

    def _remove_tail(self, pos: int, replacement: _Tail | None) -> None:
        # Mirrors removeTailCacheEntry, including that replacing an entry in
        # the middle leaves the evicted key in the index (a reference quirk
        # that only makes a later duplicate get skipped).
        history, index = self.history, self.history_index
        entry = history[pos]
        if pos == len(history) - 1:
            index.pop((entry.id1, entry.link_type), None)
            if replacement is None:
                history.pop()
            else:
                history[pos] = replacement
                index[(replacement.id1, replacement.link_type)] = pos
            return
        if replacement is None:
            replacement = history.pop()
        history[pos] = replacement
        index[(replacement.id1, replacement.link_type)] = pos

    # -- node operations -----------------------------------------------------------

    def _add_node(self, rng: JavaRandom) -> Op:
        op = Op(ADD_NODE, 0, DEFAULT_NODE_TYPE)
        op.data = self.node_add.fill(rng, self.node_size.choose(rng))
        op.version, op.time = 1, _now_s()
        return op

    def _update_node(self, rng: JavaRandom) -> Op:
        op = Op(UPDATE_NODE, self.shared.access.node_updates.next_id(rng), DEFAULT_NODE_TYPE)
        op.data = self.node_up.fill(rng, self.node_size.choose(rng))
        op.version, op.time = 2, _now_s()
        return op

    def _delete_node(self, rng: JavaRandom) -> Op:
        return Op(DELETE_NODE, self.shared.access.node_deletes.next_id(rng), DEFAULT_NODE_TYPE)

    def _get_node(self, rng: JavaRandom) -> Op:
        return Op(GET_NODE, self.shared.access.node_reads.next_id(rng), DEFAULT_NODE_TYPE)


def _motif(w: Workload, gen: Datagen) -> MotifData:
    return MotifData(gen.start, gen.end, gen.uniqueness, w.motif_length(gen))


def _now_ms() -> int:
    return _time.time_ns() // 1_000_000


def _now_s() -> int:
    return _time.time_ns() // 1_000_000_000


def requester_rng(seed: int) -> JavaRandom:
    """A requester's generator, advanced past the `nextLong` the reference logs at start."""
    rng = JavaRandom(seed)
    rng.next_long()
    return rng
