"""Run a rebalance: the planner's moves (`rebalance_plan`), one (or N) at a time, resumable.

The plan is made once, from the map and each shard's rows (counted on a
replica), and saved beside the map (`.NAME.rebalance`, JSON, replaced
atomically under the map's lock), each move marked done when its
`move_shard` returns. Killed at any point, the same command resumes: the
saved plan is kept (a new plan from the half-moved map could differ), moves
marked done are skipped, and the move under way resumes from its record in
the map (`storage.moves`), whose guarantees every move keeps: writes never
refused, nothing lost, reads never wrong, verify before live. When every move
is done the plan file is removed. One rebalance of a map runs at a time (a
lock beside the map, `.NAME.rebalance.lock`).

The time a plan takes is estimated from the copy rate the moves of this plan
measured so far (saved in the plan), or before any, `ESTIMATED_RATE`.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import msgspec

from ..core.errors import InvalidRequest
from .moves import COPIED, MoveProgress, move_shard
from .rebalance_plan import plan
from .registry import open_shardmap
from .shardmap_config import load, locked

#: Rows a second a move copies, until this plan's moves measured it
#: (`python -m bench grow` on a small two-server machine).
ESTIMATED_RATE = 25_000.0


class Step(msgspec.Struct, frozen=True):
    shard: int
    source: str
    target: str
    rows: int
    done: bool = False
    seconds: float = 0.0  # the whole move, waits and verify included (0: not timed)
    copy_seconds: float = 0.0  # its copy phase (of the run that finished it)


class Plan(msgspec.Struct, frozen=True):
    steps: list[Step]
    rate: float = 0.0  # rows/s of the finished moves, whole (0: none finished yet)

    @property
    def remaining(self) -> list[Step]:
        return [step for step in self.steps if not step.done]

    def seconds(self, settle: float) -> float:
        """The estimated time of the moves not done yet: at the rate the finished moves
        measured (waits and verify included), or before any, at `ESTIMATED_RATE` plus a
        move's two waits of `settle` seconds each."""
        rows = sum(step.rows for step in self.remaining)
        if self.rate:
            return rows / self.rate
        return rows / ESTIMATED_RATE + 2 * settle * len(self.remaining)


class Progress(NamedTuple):
    """Where a rebalance is, for a progress line."""

    done: int  # moves finished
    total: int  # moves planned
    step: Step | None  # the move reporting (None: a move just finished)
    copied: int  # rows of this move copied so far
    rows_per_second: float
    eta: float  # seconds to the end of the plan, estimated


def plan_file(path: str | Path) -> Path:
    file = Path(path)
    return file.with_name(f".{file.name}.rebalance")


def saved(path: str | Path) -> Plan | None:
    """The plan a rebalance of this map saved and did not finish, if any."""
    try:
        return msgspec.json.decode(plan_file(path).read_bytes(), type=Plan)
    except FileNotFoundError:
        return None


def make_plan(path: str | Path, to: str | None = None, limit: int | None = None) -> Plan:
    """A new plan for the map at `path`: moves that even out rows per server (only onto
    `to`, if given). Counts each shard's rows on a replica."""
    smap = load(path)
    if to is not None and to not in smap.backends:
        raise InvalidRequest(f"there is no backend {to!r} in {path}")
    if smap.moves:
        raise InvalidRequest(
            f"{len(smap.moves)} copies are under way in {path}: finish or cancel them first"
        )
    servers = [name for name, config in smap.backends.items() if not config.down]
    if to is not None and to not in servers:
        raise InvalidRequest(f"backend {to} is marked down (drained): mark it up first")
    cluster = open_shardmap(path)
    try:
        sizes = [sum(cluster.count_rows(s, t) for t in COPIED) for s in range(smap.shards)]
    finally:
        cluster.close()
    replicas = [[r.backend for r in smap.replicas[s]] for s in range(smap.shards)]
    moves = plan(replicas, sizes, servers, None if to is None else [to], limit)
    return Plan([Step(m.shard, m.source, m.target, m.rows) for m in moves])


def rebalance(
    path: str | Path,
    chosen: Plan,
    *,
    parallel: int = 1,
    rate: float | None = None,
    settle: float | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> Plan:
    """Run the moves of `chosen` not done yet, `parallel` at a time (each throttled to
    `rate` rows/s), saving the plan as each finishes; returns the plan as it ended.
    Resumes a saved plan: pass `saved(path)`. Raises InvalidRequest if another rebalance
    of the map runs, Unavailable if a move fails (run again: it resumes)."""
    try:
        with locked(path, "rebalance.lock", wait=False):
            return _Run(Path(path), chosen, rate, settle, progress).all(parallel)
    except BlockingIOError:
        raise InvalidRequest(f"another rebalance of {path} is running") from None


class _Run:
    def __init__(
        self,
        path: Path,
        chosen: Plan,
        rate: float | None,
        settle: float | None,
        progress: Callable[[Progress], None] | None,
    ) -> None:
        self.path = path
        self.plan = chosen
        self.rate = rate
        self.settle = settle
        self.progress = progress
        self.lock = threading.Lock()
        self.copied = sum(step.rows for step in chosen.steps if step.done)
        self.seconds = 0.0  # time of the moves this run finished
        self.moved = 0  # and their rows

    def all(self, parallel: int) -> Plan:
        self._save()
        todo = self.plan.remaining
        if parallel <= 1:
            for step in todo:
                self._one(step)
        else:
            # A shard's own moves run in turn (one copy of a shard at a time); shards at once.
            by_shard: dict[int, list[Step]] = {}
            for step in todo:
                by_shard.setdefault(step.shard, []).append(step)
            with ThreadPoolExecutor(parallel, thread_name_prefix="assocdb-rebalance") as pool:
                tasks = [pool.submit(self._in_turn, steps) for steps in by_shard.values()]
                for future in tasks:
                    future.result()
        with locked(self.path), contextlib.suppress(FileNotFoundError):
            plan_file(self.path).unlink()
        return self.plan

    def _in_turn(self, steps: list[Step]) -> None:
        for step in steps:
            self._one(step)

    def _one(self, step: Step) -> None:
        started = time.perf_counter()
        last = [0.0]
        copying = [0.0]

        def report(moving: MoveProgress) -> None:
            if moving.phase == "copying":
                copying[0] = moving.seconds
            now = time.perf_counter()
            if self.progress is not None and now - last[0] >= 1.0:
                last[0] = now
                self._report(step, moving.copied, moving.rows_per_second)

        result = move_shard(
            self.path,
            step.shard,
            step.target,
            remove=step.source,
            move=True,
            rate=self.rate,
            settle=self.settle,
            progress=report,
        )
        with self.lock:
            seconds = time.perf_counter() - started
            rate = self.plan.rate
            if not result.already:
                self.seconds += seconds
                self.moved += step.rows
                rate = self.moved / self.seconds if self.seconds else rate
            finished = msgspec.structs.replace(
                step, done=True, seconds=round(seconds, 3), copy_seconds=round(copying[0], 3)
            )
            steps = [finished if s == step else s for s in self.plan.steps]
            self.plan = Plan(steps, rate)
            self._save()
        self._report(None, 0, rate)

    def _report(self, step: Step | None, copied: int, speed: float) -> None:
        if self.progress is None:
            return
        done = len(self.plan.steps) - len(self.plan.remaining)
        left = sum(s.rows for s in self.plan.remaining) - copied
        eta = left / (speed or self.plan.rate or ESTIMATED_RATE)
        self.progress(Progress(done, len(self.plan.steps), step, copied, speed, eta))

    def _save(self) -> None:
        """The plan, replaced atomically under the map's lock (a test may hold the lock
        to see a consistent state before it kills the process)."""
        file = plan_file(self.path)
        with locked(self.path), _temporary(file) as temporary:
            with temporary.open("wb") as out:
                out.write(msgspec.json.encode(self.plan))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, file)


@contextlib.contextmanager
def _temporary(file: Path) -> Iterator[Path]:
    temporary = file.with_name(f"{file.name}.{os.getpid()}.tmp")
    try:
        yield temporary
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
