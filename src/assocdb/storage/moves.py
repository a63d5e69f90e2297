"""Add a replica of a shard, or move a shard, online: Gizzard's write-only copy.

One operation makes a new copy of a logical shard on a backend of the map,
while the graph is in use, in phases the map file records (`MoveRecord`):

1. **write-only**: the copy joins the shard's replica set with weight 0. Every
   process using the map takes the change within a second (`ShardMapBackend`
   reloads the file), and from then on every write of the shard reaches the copy
   through the normal write path: a failure there fails the leg, and the journal
   retries it, so no write is lost. No read goes to the copy. The mover waits
   `settle` seconds (every process has reloaded, writes begun before are done).
2. **copying**: the shard's rows (edges, node states, objects, home timelines,
   index entries; the id counter and, for shard 0, the graph's settings) are
   read from a healthy replica in key order, in large keyset pages, and
   written to the copy with the merge rule, the same rule every write uses,
   in multi-row statements while the next page is read (`storage.copier`). A
   row a live write put on the copy meanwhile is newer than the copied one,
   so the copy never overwrites it: the copy commutes with live writes,
   whatever their order. Counts are not copied: every row the merge stores
   adds its own count delta, so the copy's counts follow from its rows. The
   position (table, last key) is saved in the map at most once a second, so
   a crash repeats at most a second of pages, which changes nothing.
3. **verifying**: `replica_verify` compares every replica of the shard and
   repairs what differs (the merge rule again), until a pass finds nothing.
4. **live**: the copy gets its read weight; for a move the old copy gets weight
   0 (drained of reads), and after `settle` seconds it leaves the replica set
   (its rows stay where they are, until `storage.reclaim` drops them). A new
   copy's schema is made on its server (`reclaim.make_room`) under the map's
   lock before the copy joins the replica set: reclaim may have dropped it.

Each phase is saved before the next starts, so the operation survives a crash
or Ctrl-C of its process and resumes where it stopped when run again; running
it again after it finished does nothing. A copy that is not live yet can be
rolled back instead (`cancel_move`): it leaves the replica set, and the shard
is as it was.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from ..core.errors import InvalidRequest, Unavailable
from . import copier
from .backend import Backend
from .reclaim import make_room
from .registry import open_shardmap
from .replica_verify import tables_of, timeline_cap, verify_replicas
from .shardmap import RELOAD_EVERY, ShardMapBackend
from .shardmap_config import (
    MoveRecord,
    ShardMap,
    check_backend,
    load,
    locked,
    update,
    with_moves,
    with_replica,
    with_weight,
    without_replica,
)

log = logging.getLogger("assocdb.moves")

PAGE = copier.PAGE
SAVE_EVERY = 1.0  # seconds between saves of the copy's position
VERIFY_PASSES = 5
#: The tables copied, in order (counts follow from the edges; index tables are added).
COPIED = ("edges", "node_states", "objects", "timelines")


class MoveProgress(NamedTuple):
    """Where a copy is, for a progress bar."""

    shard: int
    phase: str
    copied: int  # rows copied so far (this run and the runs before)
    total: int  # rows to copy (an estimate, counted when the copy started)
    rows_per_second: float  # this run's
    seconds: float = 0.0  # this run's copy so far


class MoveResult(NamedTuple):
    shard: int
    target: str
    source: str | None  # the copy removed (a move), or None (an added replica)
    copied: int
    differences: int  # rows the verify pass repaired
    seconds: float
    already: bool  # nothing was left to do


def move_shard(
    path: str | Path,
    shard: int,
    target: str,
    *,
    remove: str | None = None,
    move: bool = False,
    weight: int = 1,
    rate: float | None = None,
    page: int = PAGE,
    settle: float | None = None,
    progress: Callable[[MoveProgress], None] | None = None,
) -> MoveResult:
    """Make a live copy of `shard` on backend `target` of the map file `path`; with `move`,
    then take the old copy (`remove`, or the shard's only other replica) out of the set.

    `rate` caps the rows copied per second; `settle` is how long every process is given
    to take a change of the map (default: a reload interval plus the slowest backend's
    query timeout, twice). Resumes an operation a crash stopped; a finished one is not
    repeated. Raises InvalidRequest for a bad request, Unavailable if a backend fails
    (run it again: it resumes).

        move_shard("cluster.toml", 3, "db4", move=True, rate=5000)
    """
    started = time.perf_counter()
    smap = load(path)
    if not 0 <= shard < smap.shards:
        raise InvalidRequest(f"shard {shard} is outside shards 0-{smap.shards - 1}")
    started_now: list[MoveRecord | None] = []

    def start(now: ShardMap) -> ShardMap:
        # Decided on the map as it is under its lock: two movers of one shard started at
        # once record one operation, not two.
        found = _record(now, shard, target)
        record: MoveRecord | None
        if found is not None:
            _check_resumed(found, remove, move)
            new, record = now, found
        else:
            new, record = _start(now, shard, target, remove, move, weight)
        if record is not None and record.phase != "live":
            # Under the map's lock: reclaim cannot drop the copy's schema between this and
            # the map naming the copy, and no process writes to the copy before it exists.
            make_room(cluster, new, target, shard)
        started_now.append(record)
        return new

    with _one_mover(path, shard, target):
        cluster = open_shardmap(path)
        try:
            update(path, start)
            record = started_now[-1]
            if record is None:
                return MoveResult(shard, target, remove, 0, 0, time.perf_counter() - started, True)
            wait = _settle(smap) if settle is None else settle
            mover = _Mover(path, cluster, record, rate, page, wait, progress)
            mover.run()
        finally:
            cluster.close()
    return MoveResult(
        shard,
        target,
        record.source,
        mover.copied,
        mover.differences,
        time.perf_counter() - started,
        False,
    )


@contextmanager
def _one_mover(path: str | Path, shard: int, target: str) -> Iterator[None]:
    """Be the one process making the copy of `shard` on `target`: a lock beside the map
    (`.NAME.move-SHARD-TARGET.lock`), held while the copy is made. A second mover of the
    same copy is refused at once (before, both copied and verified, and both moved its
    phases on)."""
    try:
        with locked(path, f"move-{shard}-{target}.lock", wait=False):
            yield
    except BlockingIOError:
        raise InvalidRequest(
            f"another process is making the copy of shard {shard} on {target}: let it "
            f"finish (running this command again afterwards does nothing more), or "
            f"stop it first"
        ) from None


def drop_replica(
    path: str | Path, shard: int, backend: str, *, settle: float | None = None
) -> bool:
    """Take `backend`'s copy of `shard` out of its replica set: drained of reads first
    (weight 0, then `settle` seconds), then removed. Its rows stay on the backend.
    Returns False if it held no copy (already dropped). Refuses the last readable copy.
    """
    smap = load(path)
    if not 0 <= shard < smap.shards:
        raise InvalidRequest(f"shard {shard} is outside shards 0-{smap.shards - 1}")
    check_backend(smap, backend)
    if backend not in [r.backend for r in smap.replicas[shard]]:
        return False

    def drain(smap: ShardMap) -> ShardMap:
        if any(m.shard == shard and backend in (m.target, m.source) for m in smap.moves):
            raise InvalidRequest(f"shard {shard}: a copy to or from {backend!r} is under way")
        if backend not in [r.backend for r in smap.replicas[shard]]:
            return smap  # dropped meanwhile
        without_replica(smap, shard, backend)  # refused early if it is the last readable copy
        return with_weight(smap, [shard], backend, 0)

    update(path, drain)
    time.sleep(_settle(smap) if settle is None else settle)
    cluster = open_shardmap(path)
    try:
        level_ids(cluster, shard, backend)
    finally:
        cluster.close()
    # The map as it is now (another tool may have changed it while ids were levelled).
    update(path, lambda now: _without(now, shard, backend))
    return True


def _without(smap: ShardMap, shard: int, backend: str) -> ShardMap:
    """The map without `backend`'s replica of `shard` (as it is, if it holds none)."""
    if backend not in [r.backend for r in smap.replicas[shard]]:
        return smap
    return without_replica(smap, shard, backend)


def cancel_move(path: str | Path, shard: int, target: str) -> bool:
    """Roll back the copy of `shard` being made on `target` (a move or an added replica):
    the copy leaves the replica set and the operation is forgotten; the shard is as it
    was before (the rows already copied stay on `target`, for the operator to drop).
    Returns False if no such copy is under way. Refuses a copy already live (run the
    move again to finish it). Stop its mover first.
    """
    cancelled: list[MoveRecord] = []

    def cancel(smap: ShardMap) -> ShardMap:
        if target not in smap.backends:
            raise InvalidRequest(f"there is no backend {target!r} in {path}")
        if not 0 <= shard < smap.shards:
            raise InvalidRequest(f"shard {shard} is outside shards 0-{smap.shards - 1}")
        record = _record(smap, shard, target)
        if record is None:
            return smap
        if record.phase == "live":
            raise InvalidRequest(
                f"shard {shard}: the copy on {target!r} is live already; run the move again "
                f"to finish it (or drop a replica afterwards)"
            )
        moves = [m for m in smap.moves if m is not record]
        copy = next(r for r in smap.replicas[shard] if r.backend == target)
        if copy.weight == 0:  # added by the mover (a copy placed by hand, and read, stays)
            smap = without_replica(with_moves(smap, moves), shard, target)
        cancelled.append(record)
        return with_moves(smap, moves)

    update(path, cancel)
    if not cancelled:
        return False
    log.warning("shard %d: the copy on %s is cancelled", shard, target)
    return True


def level_ids(backend: ShardMapBackend, shard: int, leaving: str) -> None:
    """Before `leaving` leaves the replica set of `shard`: raise the id counter of every
    replica that answers to the highest one.

    When the primary leaves, the next replica takes over allocating ids, and one that
    failed during allocations lags (a process raises the counters it reaches, but only
    while they answer): it would hand those ids out again. Unavailable if that next
    primary does not answer.
    """
    names = [r.backend for r in backend.map.replicas[shard]]
    firsts: dict[str, int] = {}
    for name in names:
        try:
            firsts[name] = backend.member(name).allocate(shard, 0)
        except Unavailable:
            continue  # raised by the next allocation that reaches it (`ShardMapBackend`)
    top = max(firsts.values(), default=0)
    for name, first in firsts.items():
        if first < top:
            backend.member(name).allocate(shard, top - first)
    heir = next((name for name in names if name != leaving), None)
    if names[0] == leaving and heir is not None and heir not in firsts:
        raise Unavailable(
            f"shard {shard}: {heir} does not answer, so its id counter cannot be raised "
            f"before it becomes the primary; run again when it is up"
        )


def _settle(smap: ShardMap) -> float:
    slowest = max(c.query_timeout for c in smap.backends.values())
    return 2 * RELOAD_EVERY + slowest


def _record(smap: ShardMap, shard: int, target: str) -> MoveRecord | None:
    return next((m for m in smap.moves if m.shard == shard and m.target == target), None)


def _start(
    smap: ShardMap,
    shard: int,
    target: str,
    remove: str | None,
    move: bool,
    weight: int,
) -> tuple[ShardMap, MoveRecord | None]:
    """The map with a new operation recorded and the write-only copy added, and its
    record; (the map, None) if it is done already."""
    check_backend(smap, target)
    names = [r.backend for r in smap.replicas[shard]]
    if move and remove is None:
        others = [n for n in names if n != target]
        if not others:
            return smap, None  # the shard's only replica is on the target: moved before
        if len(others) != 1:
            raise InvalidRequest(
                f"shard {shard} has replicas on {', '.join(others)}: say which one moves (--from)"
            )
        remove = others[0]
    if remove is not None and remove == target:
        raise InvalidRequest("a shard cannot move to the backend it moves from")
    if target in names and (remove is None or remove not in names):
        return smap, None  # the copy exists and nothing is left to remove: done before
    if smap.backends[target].down:  # no write would land on it: all of them would wait
        raise InvalidRequest(f"backend {target} is marked down (drained): mark it up first")
    if not _readable(smap, shard, target):
        drained = [n for n in names if n != target and smap.backends[n].down]
        raise InvalidRequest(
            f"shard {shard}: no replica to copy from may be read ({', '.join(drained)} "
            f"marked down, drained): mark one up first"
        )
    if target in names:
        # A copy placed by hand: verified (and repaired) before the old one leaves.
        record = MoveRecord(shard, target, "verifying", remove, weight)
        return with_moves(smap, [*smap.moves, record]), record
    if remove is not None and remove not in names:
        raise InvalidRequest(f"backend {remove!r} holds no replica of shard {shard}")
    record = MoveRecord(shard, target, "write-only", remove, weight)
    log.warning("shard %d: a write-only copy on %s joins its replicas", shard, target)
    return with_moves(with_replica(smap, shard, target, 0), [*smap.moves, record]), record


def _check_resumed(record: MoveRecord, remove: str | None, move: bool) -> None:
    """InvalidRequest unless the operation asked for is the one recorded: an add-replica
    run again must not finish a move (and take a replica out), nor a move finish an
    added replica (and leave the replica it was asked to remove)."""
    shard, target = record.shard, record.target
    if record.source is None and not move:
        return
    if record.source is not None and move and remove in (None, record.source):
        return
    recorded = (
        f"a move of shard {shard} from {record.source} to {target}"
        if record.source is not None
        else f"an added replica of shard {shard} on {target}"
    )
    raise InvalidRequest(
        f"{recorded} is under way ({record.phase}): run the command that started it "
        f"again to finish it, or cancel it first (assocdb shards cancel)"
    )


def _readable(smap: ShardMap, shard: int, target: str) -> list[str]:
    """The replicas of `shard` a copy on `target` may be filled from and verified
    against: read (weight above 0) and not drained."""
    return [
        r.backend
        for r in smap.replicas[shard]
        if r.backend != target and r.weight and not smap.backends[r.backend].down
    ]


class _Mover:
    """The phases of one recorded operation (see the module docstring)."""

    def __init__(
        self,
        path: str | Path,
        backend: ShardMapBackend,
        record: MoveRecord,
        rate: float | None,
        page: int,
        settle: float,
        progress: Callable[[MoveProgress], None] | None,
    ) -> None:
        self.path = Path(path)
        self.record = record
        self.rate = rate
        self.page = page if rate is None else max(1, min(page, int(rate)))
        self.settle = settle
        self.progress = progress
        self.backend = backend
        self.copied = 0
        self.differences = 0
        self._started = time.perf_counter()
        self._saved = time.monotonic()
        self._from: tuple[str, Backend] | None = None  # the replica copied from, while it answers
        self._base = 0

    def run(self) -> None:
        shard = self.record.shard
        if self.record.phase == "write-only":
            time.sleep(self.settle)  # every process writes to the copy from now on
            self._save(phase="copying")
        if self.record.phase == "copying":
            self._copy()
            self._save(phase="verifying", table="", after="")
        if self.record.phase == "verifying":
            self._verify()
            self._save(self._weights, phase="live")
            log.warning("shard %d: the copy on %s is live", shard, self.record.target)
            if self.record.source is not None:
                time.sleep(self.settle)  # no process reads the old copy any more
        if self.record.phase == "live":
            source = self.record.source
            if source is not None and source in [
                r.backend for r in load(self.path).replicas[shard]
            ]:
                self._reload()
                level_ids(self.backend, shard, source)
            update(self.path, self._finish)
            if source is not None:
                log.warning("shard %d: %s left its replicas", shard, source)

    # -- the copy ------------------------------------------------------------------------

    def _copy(self) -> None:
        shard, record = self.record.shard, self.record
        target = self.backend.member(record.target)
        tables = [*COPIED, *(t for t in tables_of(self.backend) if t.startswith("index_"))]
        start = tables.index(record.table) if record.table in tables else 0
        after: Any = None
        if record.after and record.table in tables:  # else the table is gone: start over
            after = msgspec.msgpack.decode(bytes.fromhex(record.after))
        self.copied = record.copied
        source = self._source()
        total = record.copied + sum(source.count_rows(shard, t) for t in tables[start:])
        cap = timeline_cap(self.backend)
        self._started = time.perf_counter()
        self._base = self.copied  # rows copied by the runs before this one
        self._report("copying", total)
        throttle = copier.Throttle(self.rate)

        def done(page: copier.Page) -> None:
            self.copied += len(page.rows)
            self._maybe_save(page.table, page.last)
            self._report("copying", total)

        for table in tables[start:]:
            copier.run(
                copier.pages(self._read_page, table, after, self.page, throttle),
                lambda page: copier.write_page(target, shard, page, cap),
                done,
            )
            after = None
            self._save(table=table, after="", copied=self.copied)
        self._copy_counter(target)
        if shard == 0:
            self._copy_settings(target)

    def _source(self) -> Backend:
        """A readable replica of the shard other than the copy (the primary if it is up),
        never a drained one: an operator's drain means no reads, and a drained replica
        misses the writes made meanwhile. Chosen again if the one chosen is drained."""
        if self._from is not None and not self._drained(self._from[0]):
            return self._from[1]
        self._from = None
        for name in self._readable():
            if self.backend.probe(name) is None:
                self._from = (name, self.backend.member(name))
                return self._from[1]
        raise Unavailable(f"shard {self.record.shard}: no replica to copy from answers")

    def _readable(self) -> list[str]:
        """The replicas of the shard the copy may be filled from and verified against."""
        return _readable(self.backend.map, self.record.shard, self.record.target)

    def _drained(self, name: str) -> bool:
        config = self.backend.map.backends.get(name)
        return config is None or config.down

    def _read_page(self, table: str, after: Any, size: int) -> list[tuple[Any, ...]]:
        shard = self.record.shard
        try:
            return self._source().export_table(shard, table, after, size)
        except Unavailable:  # another replica, once
            self._from = None
            return self._source().export_table(shard, table, after, size)

    def _copy_counter(self, target: Backend) -> None:
        """Raise the copy's id counter to the source's (it may become the primary)."""
        shard = self.record.shard
        first = self._source().allocate(shard, 0)
        have = target.allocate(shard, 0)
        if have < first:
            target.allocate(shard, first - have)

    def _copy_settings(self, target: Backend) -> None:
        """Copy the graph's settings (kept with shard 0) the primary decided."""
        rows = self._source().export_table(0, "meta", None, 100_000)
        for key, _ in rows:
            held = target.get_meta(key)  # the copy's value first, then the decided one:
            value = self.backend.get_meta(key)  # a newer swap copied meanwhile fails ours
            if value is not None and held != value:
                target.swap_meta(key, held, value)

    def _report(self, phase: str, total: int) -> None:
        if self.progress is not None:
            seconds = time.perf_counter() - self._started
            done = self.copied - self._base
            speed = done / seconds if seconds > 0 else 0.0
            progress = MoveProgress(self.record.shard, phase, self.copied, total, speed, seconds)
            self.progress(progress)

    # -- verify and the map ---------------------------------------------------------------

    def _verify(self) -> None:
        shard = self.record.shard
        self._reload()
        # Drained replicas are not read: a move's drained source leaves the set anyway,
        # and another one catches up from the journals when it is marked up again.
        target = self.record.target
        if self._drained(target):
            raise Unavailable(
                f"shard {shard}: the copy's backend {target} is marked down (drained), so "
                f"the copy cannot be verified; mark it up and run again, or cancel the copy"
            )
        drained = [r.backend for r in self.backend.map.replicas[shard] if self._drained(r.backend)]
        if not self._readable():
            raise Unavailable(
                f"shard {shard}: the copy on {self.record.target} cannot be verified: no "
                f"other replica may be read ({', '.join(drained) or 'none'} drained); "
                f"mark one up and run again"
            )
        for _ in range(VERIFY_PASSES):
            report = verify_replicas(self.backend, [shard], repair=True, skip=drained)
            self.differences += len(report.differences)
            if not report.differences:
                return
        raise Unavailable(
            f"shard {shard}: its replicas still differ after {VERIFY_PASSES} repairs "
            f"(is a replica failing writes?); run again to resume"
        )

    def _reload(self) -> None:
        """The map's replica sets now (a backend's changed settings wait for a reopen: the
        rest of the change is taken all the same, see `ShardMapBackend.reload`)."""
        try:
            self.backend.reload()
        except InvalidRequest as exc:
            log.warning("%s", exc)

    def _maybe_save(self, table: str, after: list[Any]) -> None:
        if time.monotonic() - self._saved >= SAVE_EVERY:
            encoded = msgspec.msgpack.encode(after).hex()
            self._save(table=table, after=encoded, copied=self.copied)

    def _weights(self, smap: ShardMap) -> ShardMap:
        """The map with the copy's read weight given, and a move's old copy drained."""
        shard = self.record.shard
        smap = with_weight(smap, [shard], self.record.target, self.record.weight)
        source = self.record.source
        if source is not None and source in [r.backend for r in smap.replicas[shard]]:
            smap = with_weight(smap, [shard], source, 0)  # (dropped meanwhile: gone already)
        return smap

    def _finish(self, smap: ShardMap) -> ShardMap:
        """The map with a move's old copy out of the set and the operation forgotten."""
        shard, source = self.record.shard, self.record.source
        if source is not None:
            smap = _without(smap, shard, source)
        key = (shard, self.record.target)
        return with_moves(smap, [m for m in smap.moves if (m.shard, m.target) != key])

    def _save(self, also: Callable[[ShardMap], ShardMap] | None = None, **changes: Any) -> None:
        """Record the operation's new state in the map as it is now, under its lock (another
        tool may change weights meanwhile), with the change `also` made at the same time.
        InvalidRequest if the operation is no longer recorded: it was cancelled."""
        record = msgspec.structs.replace(self.record, **changes)
        key = (record.shard, record.target)

        def change(current: ShardMap) -> ShardMap:
            if key not in [(m.shard, m.target) for m in current.moves]:
                raise InvalidRequest(
                    f"shard {record.shard}: the copy on {record.target} is no longer "
                    f"recorded in the map (it was cancelled, or another mover finished "
                    f"it) while this mover ran; it stops"
                )
            moves = [record if (m.shard, m.target) == key else m for m in current.moves]
            return with_moves(current if also is None else also(current), moves)

        update(self.path, change)
        self.record = record
        self._saved = time.monotonic()
