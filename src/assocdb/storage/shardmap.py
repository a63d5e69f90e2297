"""A Backend made of other backends: logical shards on replica sets (Gizzard's replication).

`ShardMapBackend` implements the `Backend` protocol over the member backends a shard map
(`shardmap_config`) names, each opened with the map's shard count (a member holds shard s
under number s). Each member has a failure detector (`detector.Health`).

Writes go to every replica of the shard (at once, on a thread pool, when the members are
database servers). Because `apply` is an idempotent, commutative merge, a failed replica
is simply written again later: if any replica fails (or is marked down), `apply` raises
`Unavailable` and the journal retries the whole leg, harmless where it already landed.
The `Changes` returned are the replicas' common answer; when replicas
answered differently (one had the write already) or a write landed only
partly, the cache cannot patch itself exactly, so the keys are handed to the
`forget_hooks` (the cache drops them) and no changes are returned.

Reads go to one healthy replica, picked at random by weight (weight 0: a
write-only copy, never read), and fail over to the next on `Unavailable`. A
replica that missed a write this process made (it was down or failed) is
*behind* on that shard until the journal's retry lands there; reads prefer
replicas that are not behind, so a process reads its own writes across a
failover.

Consistency of the graph-wide state:

* Settings (`get_meta`/`swap_meta`, the schema) live on the replicas of
  shard 0. The compare-and-swap is decided by the *primary* (the first
  replica listed) and then copied to the others; if a copy fails the swap
  raises `Unavailable` and the copy is retried on a later read. Reads of a
  setting ask the primary first and fall back to another replica.
* Ids are allocated on the shard's primary, which must be up; the other
  replicas' counters are raised to at least the primary's, so promoting a
  replica that was up during allocations cannot hand out an id twice.
* A down member gets no work but probes (see `detector`), run by one
  background thread, so no request waits for a dead server's timeout once it
  is marked down.

What "behind" and pending copies remember lives in this process only; the
journal is what makes writes durable, and after a restart it replays every
unfinished write to every replica.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import random
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import msgspec

from ..core.cachekeys import COUNTS, OBJECT, PREFIX, CacheKey
from ..core.errors import AssocdbError, InvalidRequest, Unavailable
from ..core.merge import NO_CHANGES, Changes, EdgeKey, EdgeRow, EdgeTuple, NodeRow, ObjRow
from ..core.records import CountMismatch
from ..core.scans import EdgeScan, Id2Row, IndexEntry, IndexScan, ListRow, SetScan, Tracer
from ..core.timeline_list import TimelineEntry
from .backend import Backend, ForgetHook, Older, probe_short_each, unions_each
from .detector import Health
from .replfeed import ReplicatedFeed
from .shardmap_config import ShardMap, from_dict, load, shown

log = logging.getLogger("assocdb.shardmap")

T = TypeVar("T")
Opener = Callable[[dict[str, Any]], Backend]
PROBE_TICK = 0.05  # how often the prober looks for due probes, seconds
RELOAD_EVERY = 1.0  # how often it looks at the map file, seconds
BEHIND_MAX = 100_000  # missed writes remembered per member and shard


class MemberStatus(NamedTuple):
    """One member backend as `assocdb shards show` and the metrics see it."""

    name: str
    where: str
    up: bool
    drained: bool
    consecutive: int
    failures: int
    downs: int
    shards: list[int]


class _Member:
    def __init__(self, name: str, spec: dict[str, Any], health: Health) -> None:
        self.name = name
        self.spec = spec
        self.health = health
        self.backend: Backend | None = None
        self.opening = threading.Lock()


class ShardMapBackend:
    """Logical shards on replica sets of member backends; see the module docstring."""

    def __init__(
        self,
        smap: ShardMap,
        opener: Opener,
        *,
        clock: Callable[[], float] = time.monotonic,
        probe_tick: float = PROBE_TICK,
        source: str | Path | None = None,
        parallel_writes: bool | None = None,
    ) -> None:
        self.map = smap
        self.source = None if source is None else Path(source)
        # Not the file's stamp now: it may have changed since `smap` was read from it, and
        # that change would never be taken. The first look at the file reloads it.
        self._source_stamp: bytes | None = None
        self._next_reload = 0.0
        self.shards = smap.shards
        self.tracers: list[Tracer] = []
        self.forget_hooks: list[ForgetHook] = []
        #: Called when a member comes back up (the graph retries its queued writes now).
        self.recovery_hooks: list[Callable[[], None]] = []
        self.failovers = 0  # reads answered by another replica after one failed
        self._opener = opener
        self._clock = clock
        self._lock = threading.Lock()  # guards health changes and `_behind`
        self._random = random.Random()
        d = smap.detector
        self._members = {
            n: _Member(n, smap.member_spec(n), Health(d.threshold, d.probe_interval, d.probe_max))
            for n in smap.backends
        }
        for name, config in smap.backends.items():
            if config.down:
                self._members[name].health.drain(True, clock())
        self._replicas = [
            [(self._members[r.backend], r.weight) for r in reps] for reps in smap.replicas
        ]
        #: Whether every member is a directory on this machine (members are opened
        #: lazily, so the map's configuration says, not the members themselves).
        self.local = all(config.local for config in smap.backends.values())
        #: Write the replicas of a shard concurrently (default: when a member is a server).
        self.parallel_writes = not self.local if parallel_writes is None else parallel_writes
        self._writers: ThreadPoolExecutor | None = None
        self._behind: dict[tuple[str, int], set[int]] = {}  # (member, shard) -> missed writes
        self._fresh_only = threading.local()  # see `fresh_reads`
        self._meta_copies: set[str] = set()  # settings not yet copied to every replica
        self._retired: list[Backend] = []  # members replaced by a reload, closed at the end
        self._feed = ReplicatedFeed(self)
        self._stop = threading.Event()
        self._prober = threading.Thread(
            target=self._probe_loop, args=(probe_tick,), name="assocdb-prober", daemon=True
        )
        self._prober.start()
        # The map is watched by a thread of its own: a probe of a hung server takes up to
        # its timeout, and a mover counts on every process taking a change within
        # `RELOAD_EVERY` (`moves._settle`), however many members are down.
        self._reloader: threading.Thread | None = None
        if self.source is not None:
            self._reloader = threading.Thread(
                target=self._reload_loop, args=(probe_tick,), name="assocdb-map", daemon=True
            )
            self._reloader.start()

    @classmethod
    def from_spec(cls, spec: dict[str, Any], opener: Opener) -> ShardMapBackend:
        """The backend `spec()` described (used by `registry.open_backend`)."""
        return cls(from_dict(spec["map"], "shard map spec", spec.get("base", ".")), opener)

    # -- members and their health -------------------------------------------------------

    def member(self, name: str) -> Backend:
        """Member backend `name`, opened if needed (for tools and fault-injection tests)."""
        return self._open(self._members[name])

    def _open(self, member: _Member) -> Backend:
        backend = member.backend
        if backend is None:
            if self._stop.is_set():
                raise InvalidRequest("this graph has been closed")
            with member.opening:
                backend = member.backend
                if backend is None:
                    try:
                        backend = self._opener(member.spec)
                    except AssocdbError:
                        raise
                    except Exception as exc:  # a broken member: fail over, as if it were down
                        raise Unavailable(
                            f"backend {member.name}: cannot open: {type(exc).__name__}: {exc}"
                        ) from exc
                    backend.tracers = self.tracers  # one list: graph.trace() sees every member
                    member.backend = backend
        return backend

    def _call(self, member: _Member, fn: Callable[[Backend], T]) -> T:
        """Run `fn` on a member, feeding its failure detector."""
        if not member.health.allows():
            raise Unavailable(f"backend {member.name} is marked down", backend=member.name)
        try:
            result = fn(self._open(member))
        except Unavailable:
            with self._lock:
                went_down = member.health.failed(self._clock())
            if went_down:
                log.warning("backend %s marked down after repeated failures", member.name)
            raise
        member.health.consecutive = 0  # a success (no lock: a lost reset is harmless)
        return result

    def status(self) -> list[MemberStatus]:
        """Every member's state, for `assocdb shards show` and the metrics."""
        with self._lock:
            return [
                MemberStatus(
                    m.name,
                    shown(m.spec["url"]) if "url" in m.spec else m.spec.get("path", ""),
                    m.health.up,
                    m.health.drained,
                    m.health.consecutive,
                    m.health.failures,
                    m.health.downs,
                    self.map.shards_of(m.name),
                )
                for m in self._members.values()
            ]

    def mark(self, name: str, up: bool) -> None:
        """Mark member `name` up or down in this process (a down member is probed back)."""
        member = self._members[name]
        with self._lock:
            member.health.mark(up, self._clock())

    def probe(self, name: str) -> str | None:
        """Probe member `name` now; None if it answered, else why not."""
        try:
            self._open(self._members[name]).get_meta("shards")
        except AssocdbError as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    def _probe_loop(self, tick: float) -> None:
        while not self._stop.wait(tick):
            try:
                self._probe_due()
            except Exception:  # the prober must outlive any one bad probe
                log.exception("probing backends failed")

    def _reload_loop(self, tick: float) -> None:
        while not self._stop.wait(tick):
            try:
                if self._clock() >= self._next_reload:
                    self._next_reload = self._clock() + RELOAD_EVERY
                    if self._stamp() != self._source_stamp:
                        self.reload()
            except Exception:  # it must outlive any one bad edit (the map it had stays)
                log.exception("reloading the shard map failed")

    def _stamp(self) -> bytes | None:
        """A digest of the map file's text. Not its mtime and size: an edit of the same size
        (a weight 1 -> 2) within one tick of the file system's clock (several ms) would
        go unseen, and this process would keep an old replica set for good."""
        try:
            text = self.source.read_bytes() if self.source is not None else None
        except OSError:
            return None
        return None if text is None else hashlib.blake2b(text, digest_size=16).digest()

    def reload(self) -> None:
        """Take new weights, drains, backends and replica sets from the map file.

        A thread of its own calls this within a second of the file changing, so
        `assocdb shards set-weight`, `mark-down`, `add-replica` and `move` reach
        running processes. A backend's own settings (its URL, path, timeouts)
        and the shard count need a reopen: InvalidRequest says so, and the rest
        of the change is taken all the same (the backend keeps its settings).
        A moved shard's replica set must reach every process, whatever else the
        file says: one still writing to the old set loses writes to it.
        """
        assert self.source is not None
        self._source_stamp = self._stamp()
        new = load(self.source)
        old = self.map
        if new.shards != old.shards:
            raise InvalidRequest(
                f"{self.source}: the shard count changed; reopen the graph to apply it"
            )
        changed = [
            name
            for name, config in new.backends.items()
            if name in old.backends
            and msgspec.structs.replace(config, down=False)
            != msgspec.structs.replace(old.backends[name], down=False)
        ]
        if changed:  # kept as they are until a reopen
            kept = {
                name: msgspec.structs.replace(old.backends[name], down=config.down)
                if name in changed
                else config
                for name, config in new.backends.items()
            }
            new = msgspec.structs.replace(new, backends=kept)
        self._take(new, old)
        if changed:
            raise InvalidRequest(
                f"{self.source}: backend {changed[0]}'s settings changed; only weights, "
                f"`down`, new backends and replica sets change while running (those were "
                f"taken): reopen the graph to apply it"
            )

    def _take(self, new: ShardMap, old: ShardMap) -> None:
        d = new.detector
        with self._lock:
            now = self._clock()
            for name, config in new.backends.items():
                member = self._members.get(name)
                previous = old.backends.get(name)  # None: new, or back after it left
                if member is not None and previous is None:
                    if member.spec == new.member_spec(name):
                        member.health.drain(config.down, now)
                        continue
                    if member.backend is not None:  # another database under its old name
                        self._retired.append(member.backend)
                    member = None
                if member is None:  # a new backend: opened on first use
                    health = Health(d.threshold, d.probe_interval, d.probe_max)
                    member = self._members[name] = _Member(name, new.member_spec(name), health)
                    if config.down:
                        member.health.drain(True, now)
                elif previous is not None and config.down != previous.down:
                    member.health.drain(config.down, now)
            self._replicas = [
                [(self._members[r.backend], r.weight) for r in reps] for reps in new.replicas
            ]
            self.map = new
        if new != old:
            log.warning("shard map %s reloaded", self.source)

    def _probe_due(self) -> None:
        with self._lock:
            now = self._clock()
            due = [m for m in self._members.values() if m.health.probe_due(now)]
        for member in due:
            ok = self.probe(member.name) is None
            with self._lock:
                back = member.health.probed(ok, self._clock())
            if back:
                log.warning("backend %s is up again", member.name)
                for hook in self.recovery_hooks:
                    hook()

    # -- routing ----------------------------------------------------------------------

    def _read_order(self, shard: int) -> list[_Member]:
        """The replicas to read from, in order: a weighted random pick first.

        Replicas that are not behind on this shard come before those that
        are; down replicas and weight-0 (write-only) replicas are left out."""
        fresh: list[tuple[_Member, int]] = []
        stale: list[tuple[_Member, int]] = []
        behind = self._behind
        for member, weight in self._replicas[shard]:
            if weight and member.health.allows():
                late = behind and (member.name, shard) in behind
                (stale if late else fresh).append((member, weight))
        if getattr(self._fresh_only, "on", False):
            return self._weighted(fresh)
        return self._weighted(fresh) + self._weighted(stale)

    def replicated(self) -> ShardMapBackend:
        return self

    def change_feed(self) -> ReplicatedFeed:
        return self._feed  # (positions name their replica: storage/replfeed.py)

    def call(self, name: str, fn: Callable[[Backend], T]) -> T:
        """`fn` on member `name`, feeding its failure detector (Unavailable if down)."""
        return self._call(self._members[name], fn)

    def exclusive_writes(self) -> AbstractContextManager[None]:
        return nullcontext()  # several databases: see docs/architecture.md

    @contextmanager
    def fresh_reads(self) -> Iterator[None]:
        """Within: reads in this thread skip replicas behind on their shard (Unavailable
        if only those are up). A write resolved against the stored row reads this way:
        a replica that missed this process's earlier write of the row would resolve it
        wrongly, where a read can merely be stale."""
        self._fresh_only.on = True
        try:
            yield
        finally:
            self._fresh_only.on = False

    def _weighted(self, pool: list[tuple[_Member, int]]) -> list[_Member]:
        order: list[_Member] = []
        while pool:
            if len(pool) == 1:
                order.append(pool[0][0])
                break
            pick = self._random.random() * sum(w for _, w in pool)
            index = 0
            while index < len(pool) - 1 and pick >= pool[index][1]:
                pick -= pool[index][1]
                index += 1
            order.append(pool.pop(index)[0])
        return order

    def _read(self, shard: int, fn: Callable[[Backend], T]) -> T:
        """`fn` on one healthy replica of the shard, failing over to the others."""
        failure: Unavailable | None = None
        for member in self._read_order(shard):
            if failure is not None:
                self.failovers += 1
            try:
                return self._call(member, fn)
            except Unavailable as exc:
                failure = exc
        names = ", ".join(m.name for m, _ in self._replicas[shard])
        why = f": {failure}" if failure is not None else " (all marked down)"
        raise Unavailable(f"shard {shard}: no replica could be read ({names}){why}")

    def _primary(self, shard: int) -> _Member:
        return self._replicas[shard][0][0]

    # -- writes ------------------------------------------------------------------------

    def apply(
        self,
        shard: int,
        edges: Sequence[EdgeTuple],
        objects: Sequence[ObjRow],
        nodes: Sequence[NodeRow] = (),
    ) -> Changes:
        answers, failed = self._write_all(shard, lambda b: b.apply(shard, edges, objects, nodes))
        if failed or self._behind:
            self._note_misses(shard, (edges, objects, nodes), answers, failed)
        if failed:
            if answers:
                self._forget([changes for _, changes in answers])
            raise _partly_written(shard, answers, failed)
        first = answers[0][1]
        if all(changes == first for _, changes in answers[1:]):
            return first
        # Replicas disagreed (one had this write already): no change set is right for the cache.
        self._forget([changes for _, changes in answers])
        return NO_CHANGES

    def bulk_merge(self, shard: int, edges: Sequence[EdgeTuple]) -> int:
        # Through `apply`: replicas that miss the write are noted the same way.
        return len(self.apply(shard, edges, ()).edges)

    def copy_edges(self, shard: int, after: EdgeKey | None, edges: Sequence[EdgeTuple]) -> int:
        return self.bulk_merge(shard, edges)  # (a copy is made on a member, not the map)

    def _write_all(
        self, shard: int, fn: Callable[[Backend], T]
    ) -> tuple[list[tuple[_Member, T]], list[tuple[_Member, Unavailable]]]:
        """`fn` on every replica of the shard: what each answered, and which failed.

        On database servers the replicas are written at once (the first in
        this thread, the others on a pool), so a write costs one round of
        network latency, not one per replica; SQLite members are written in
        turn (local and CPU-bound, they gain nothing from threads).
        """
        members = [member for member, _ in self._replicas[shard]]
        running: dict[str, Future[T]] = {}
        if self.parallel_writes:
            live = [m for m in members if m.health.allows()]
            running = {m.name: self._pool().submit(self._call, m, fn) for m in live[1:]}
        answers: list[tuple[_Member, T]] = []
        failed: list[tuple[_Member, Unavailable]] = []
        for member in members:
            try:
                future = running.get(member.name)
                answer = self._call(member, fn) if future is None else future.result()
            except Unavailable as exc:
                failed.append((member, exc))
            else:
                answers.append((member, answer))
        return answers, failed

    def _write(self, shard: int, what: Any, fn: Callable[[Backend], int]) -> int:
        """`fn` (a write that no cache holds: index entries, timelines) on every replica.

        Raises `Unavailable` unless every replica took it (the journal retries
        it; these writes are idempotent merges too); returns the largest of the
        replicas' answers (how many rows changed)."""
        answers, failed = self._write_all(shard, fn)
        if failed or self._behind:
            self._note_misses(shard, what, answers, failed)
        if failed:
            raise _partly_written(shard, answers, failed)
        return max(answer for _, answer in answers)

    def _pool(self) -> ThreadPoolExecutor:
        if self._writers is None:
            with self._lock:
                if self._writers is None:
                    self._writers = ThreadPoolExecutor(32, thread_name_prefix="assocdb-replica")
        return self._writers

    def _note_misses(
        self,
        shard: int,
        rows: Any,
        answers: Sequence[tuple[_Member, object]],
        failed: list[tuple[_Member, Unavailable]],
    ) -> None:
        """Remember which replicas missed this write, and forget those that now have it."""
        digest = hash(msgspec.msgpack.encode(rows))
        with self._lock:
            for member, _ in failed:
                missed = self._behind.setdefault((member.name, shard), set())
                if len(missed) < BEHIND_MAX:  # beyond: memory wins over read-your-writes
                    missed.add(digest)
            for member, _ in answers:
                caught_up = self._behind.get((member.name, shard))
                if caught_up is not None:
                    caught_up.discard(digest)
                    if not caught_up:
                        del self._behind[(member.name, shard)]

    def _forget(self, answers: list[Changes]) -> None:
        keys: dict[CacheKey, None] = {}
        for changes in answers:
            for _, new in changes.edges:
                keys[(COUNTS, (new[0], new[1]))] = None
                keys[(PREFIX, (new[0], new[1]))] = None
            for row in changes.objects:
                keys[(OBJECT, row[0])] = None
        if keys:
            for hook in self.forget_hooks:
                hook(list(keys))

    def index_apply(self, shard: int, entries: Sequence[IndexEntry]) -> int:
        return self._write(shard, ("index", entries), lambda b: b.index_apply(shard, entries))

    def index_purge(self, shard: int, index: int, before: int) -> int:
        return self._write(
            shard, ("purge", index, before), lambda b: b.index_purge(shard, index, before)
        )

    def index_drop(self, shard: int, index: int) -> None:
        def drop(backend: Backend) -> int:
            backend.index_drop(shard, index)
            return 0

        self._write(shard, ("drop", index), drop)

    def merge_timelines(
        self, shard: int, writes: Mapping[int, Sequence[TimelineEntry]], cap: int
    ) -> int:
        return self._write(
            shard,
            ("timelines", sorted(writes.items()), cap),
            lambda b: b.merge_timelines(shard, writes, cap),
        )

    def make_durable(self, shards: Sequence[int]) -> None:
        # On every replica this process has written; not through `_call`: a sync is no
        # probe (a server's does nothing) and must not tell a member's failure detector
        # that it works. A member that took writes and cannot sync them fails the call:
        # the journal forgets the writes once this returns, and a power cut would undo them.
        failure: AssocdbError | None = None
        for shard in shards:
            for member, _ in self._replicas[shard]:
                backend = member.backend
                if backend is not None and member.health.allows():
                    try:
                        backend.make_durable([shard])
                    except AssocdbError as exc:
                        failure = failure or exc
        if failure is not None:
            raise failure

    def allocate(self, shard: int, n: int) -> int:
        primary = self._primary(shard)
        answers = {primary.name: self._call(primary, lambda b: b.allocate(shard, n))}
        others = [m for m, _ in self._replicas[shard][1:] if m.health.allows()]
        for member in others:
            try:
                answers[member.name] = self._call(member, lambda b: b.allocate(shard, n))
            except Unavailable:
                continue  # raised on a later allocation, once it is back
        top = max(answers.values())
        for name, first in answers.items():
            if first < top:  # a counter that lags: raise it past what is handed out
                lag = top - first
                try:
                    self._call(self._members[name], lambda b: b.allocate(shard, lag))  # noqa: B023
                except Unavailable:
                    if name == primary.name:
                        raise
        return top

    # -- reads ------------------------------------------------------------------------

    def scan(self, shard: int, query: EdgeScan) -> list[ListRow]:
        return self._read(shard, lambda b: b.scan(shard, query))

    def scan_keys(self, shard: int, query: EdgeScan) -> list[tuple[int, int]]:
        return self._read(shard, lambda b: b.scan_keys(shard, query))

    def edges(self, shard: int, id1: int, atype: int, id2s: Sequence[int]) -> list[EdgeRow]:
        return self._read(shard, lambda b: b.edges(shard, id1, atype, id2s))

    def list_rows(
        self, shard: int, id1: int, atype: int, state: int, id2s: Sequence[int]
    ) -> list[ListRow]:
        return self._read(shard, lambda b: b.list_rows(shard, id1, atype, state, id2s))

    def edges_at(self, shard: int, keys: Sequence[EdgeKey]) -> list[EdgeRow]:
        return self._read(shard, lambda b: b.edges_at(shard, keys))

    def scan_id2(
        self,
        shard: int,
        id1: int,
        atype: int,
        states: Sequence[int],
        boundary: int | None,
        forward: bool,
        limit: int,
    ) -> list[Id2Row]:
        return self._read(
            shard, lambda b: b.scan_id2(shard, id1, atype, states, boundary, forward, limit)
        )

    def probe_id2s(
        self,
        shard: int,
        id1: int,
        atype: int,
        states: Sequence[int],
        id2s: Sequence[int],
        forward: bool = True,
        limit: int | None = None,
    ) -> list[int]:
        return self._read(
            shard, lambda b: b.probe_id2s(shard, id1, atype, states, id2s, forward, limit)
        )

    def set_ids(self, shard: int, query: SetScan) -> list[int]:
        return self._read(shard, lambda b: b.set_ids(shard, query))

    unions, probe_short = unions_each, probe_short_each  # (a shard at a time: its replicas)

    def node_states(
        self, shard: int, keys: Sequence[tuple[int, int]]
    ) -> dict[tuple[int, int], NodeRow]:
        return self._read(shard, lambda b: b.node_states(shard, keys))

    def export_edges(
        self, shard: int, after: EdgeKey | None, limit: int, older: Older = None
    ) -> list[EdgeRow]:
        return self._read(shard, lambda b: b.export_edges(shard, after, limit, older))

    def export_table(
        self, shard: int, table: str, after: Sequence[Any] | None, limit: int
    ) -> list[tuple[Any, ...]]:
        return self._read(shard, lambda b: b.export_table(shard, table, after, limit))

    def count_rows(self, shard: int, table: str) -> int:
        return self._read(shard, lambda b: b.count_rows(shard, table))

    def table_bound(
        self, shard: int, table: str, after: Sequence[Any] | None, rows: int
    ) -> tuple[Any, ...] | None:
        return self._read(shard, lambda b: b.table_bound(shard, table, after, rows))

    def table_summary(
        self,
        shard: int,
        table: str,
        after: Sequence[Any] | None,
        upto: Sequence[Any] | None,
    ) -> tuple[str, int, int]:
        return self._read(shard, lambda b: b.table_summary(shard, table, after, upto))

    def counts(self, shard: int, id1: int, atype: int) -> dict[int, int]:
        return self._read(shard, lambda b: b.counts(shard, id1, atype))

    def count_totals(self, shard: int) -> dict[tuple[int, int], int]:
        return self._read(shard, lambda b: b.count_totals(shard))

    def objects(self, shard: int, ids: Sequence[int]) -> list[ObjRow]:
        return self._read(shard, lambda b: b.objects(shard, ids))

    def objects_page(self, shard: int, otype: int, after: int, limit: int) -> list[ObjRow]:
        return self._read(shard, lambda b: b.objects_page(shard, otype, after, limit))

    def objects_count(self, shard: int, otype: int) -> int:
        return self._read(shard, lambda b: b.objects_count(shard, otype))

    def objects_since(
        self, shard: int, otype: int, after: tuple[int, int], limit: int
    ) -> list[ObjRow]:
        return self._read(shard, lambda b: b.objects_since(shard, otype, after, limit))

    def index_entries(self, shard: int, index: int, ids: Sequence[int]) -> list[IndexEntry]:
        return self._read(shard, lambda b: b.index_entries(shard, index, ids))

    def index_scan(self, shard: int, index: int, scan: IndexScan) -> list[tuple[bytes, int]]:
        return self._read(shard, lambda b: b.index_scan(shard, index, scan))

    def index_export(
        self, shard: int, index: int, after: tuple[bytes, int] | None, limit: int
    ) -> list[IndexEntry]:
        return self._read(shard, lambda b: b.index_export(shard, index, after, limit))

    def timelines(self, shard: int, owners: Sequence[int]) -> dict[int, bytes]:
        return self._read(shard, lambda b: b.timelines(shard, owners))

    # -- graph-wide settings and maintenance ---------------------------------------------

    def get_meta(self, key: str) -> bytes | None:
        primary = self._primary(0)
        try:
            value = self._call(primary, lambda b: b.get_meta(key))
        except Unavailable:
            return self._read(0, lambda b: b.get_meta(key))
        if key in self._meta_copies and value is not None:
            with contextlib.suppress(Unavailable):  # still not everywhere: the next read
                self._copy_meta(key, value)
        return value

    def swap_meta(self, key: str, expected: bytes | None, value: bytes) -> bool:
        primary = self._primary(0)
        if not self._call(primary, lambda b: b.swap_meta(key, expected, value)):
            return False
        self._copy_meta(key, value)
        return True

    def _copy_meta(self, key: str, value: bytes) -> None:
        """Make every other replica of shard 0 hold `value` for `key` (the primary decided)."""
        self._meta_copies.add(key)
        for member, _ in self._replicas[0][1:]:
            for _ in range(10):  # a racing copy of a newer value may win: then read again
                current = self._call(member, lambda b: b.get_meta(key))
                if current == value:
                    break
                if self._call(member, lambda b: b.swap_meta(key, current, value)):  # noqa: B023
                    break
        self._meta_copies.discard(key)

    def recount(
        self, shard: int, repair: bool, id1s: Sequence[int] | None = None
    ) -> list[CountMismatch]:
        found: dict[CountMismatch, None] = {}
        for member, _ in self._replicas[shard]:
            found.update(
                dict.fromkeys(self._call(member, lambda b: b.recount(shard, repair, id1s)))
            )
        return list(found)

    def replicas(self, shard: int, skip: Collection[str] = ()) -> list[tuple[str, Backend]]:
        """The replicas of a shard that take work now, primary first: (name, member backend),
        each opened if needed (for the replica verifier), but those named in `skip`.
        Unavailable if one is down: a comparison needs every copy."""
        found = []
        for member, _ in self._replicas[shard]:
            if member.name in skip:
                continue
            if not member.health.allows():
                raise Unavailable(f"shard {shard}: backend {member.name} is down or drained")
            found.append((member.name, self._open(member)))
        return found

    def spec(self) -> dict[str, Any]:
        return {"kind": "shardmap", "map": self.map.as_dict(), "base": self.map.base}

    def close(self) -> None:
        self._stop.set()
        self._feed.close()
        for thread in (self._prober, self._reloader):
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=5)
        if self._writers is not None:
            self._writers.shutdown(wait=True)
        for member in self._members.values():
            if member.backend is not None:
                member.backend.close()
                member.backend = None
        for backend in self._retired:
            backend.close()
        self._retired.clear()


def _partly_written(
    shard: int, answers: Sequence[tuple[_Member, object]], failed: list[tuple[_Member, Unavailable]]
) -> Unavailable:
    """The error of a write some replicas missed (`partial` if others took it)."""
    landed = ", ".join(m.name for m, _ in answers) or "no replica"
    missed = ", ".join(f"{m.name} ({exc})" for m, exc in failed)
    return Unavailable(
        f"shard {shard}: written to {landed}, not to {missed}; the journal retries it",
        partial=bool(answers),
    )
