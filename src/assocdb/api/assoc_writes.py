"""Association writes: add, delete, change type, and bulk load."""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..core import json as _json
from ..core.errors import AssocdbError, InvalidRequest, NotFound
from ..core.ids import check_id, check_time
from ..core.merge import PLAIN_NORMAL as _NORMAL
from ..core.merge import PLAIN_REMOVED as _REMOVED
from ..core.merge import State
from ..core.ops import MAX_ASSOC_DATA, EdgeWrite, TypeChange
from ..core.records import WriteResult
from ..writes.bulk import Rounds
from ..writes.workers import ShardWriter
from .engine import Engine

BULK_BATCH = 400_000  # rows per round of shard transactions
BULK_PARALLEL = 10_000  # edges read before a load starts worker processes
MAX_LOAD_NAME = 4096  # characters (`assocdb import` names a load by its file's path)
#: The largest `first` of a load's part: its progress (`first` + edges stored) is
#: kept in the journal, as a SQLite INTEGER (signed 64 bits).
MAX_LOAD_FIRST = 2**62


class AssocWrites:
    """assoc_add, assoc_delete, assoc_archive, assoc_negate, assoc_change_type, bulk_load
    (`Graph` documents each)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def assoc_add(
        self,
        id1: int,
        atype: str,
        id2: int,
        time: int | None = None,
        data: Any = None,
        updated_at: int | None = None,
    ) -> WriteResult:
        return self._engine.submit(*self.add_op(id1, atype, id2, time, data, updated_at))

    def assoc_delete(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> WriteResult:
        return self._engine.submit(*self.delete_op(id1, atype, id2, updated_at))

    def assoc_archive(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> WriteResult:
        return self._engine.submit(*self.state_op(id1, atype, id2, State.ARCHIVED, updated_at))

    def assoc_negate(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> WriteResult:
        return self._engine.submit(*self.state_op(id1, atype, id2, State.NEGATIVE, updated_at))

    def assoc_change_type(
        self, id1: int, atype: str, id2: int, new_atype: str, updated_at: int | None = None
    ) -> WriteResult:
        op, ua = self.change_type_op(id1, atype, id2, new_atype, updated_at)
        try:
            return self._engine.submit(op, ua)
        except NotFound as exc:
            raise self.not_found(op) from exc

    # -- the operations, checked and stamped (`Graph.batch` submits them together) --

    def add_op(
        self,
        id1: int,
        atype: str,
        id2: int,
        time: int | None = None,
        data: Any = None,
        updated_at: int | None = None,
    ) -> tuple[EdgeWrite, int]:
        id1, id2 = check_id(id1, "id1"), check_id(id2, "id2")
        kind = self._engine.assoc_type(atype)
        if time is not None:
            check_time(time)
        raw = None if data is None else _json.encode(data, MAX_ASSOC_DATA, "association data")
        ua = self._engine.stamp(updated_at)
        inverse = self._engine.inverse_id(kind)
        # An edge of a type with a ttl is written afresh (its time now unless given, its
        # data as given): re-adding one restarts its life whether or not the expired edge
        # was still stored (`core.ttl`).
        keep = kind.ttl is None
        return EdgeWrite(kind.id, inverse, id1, id2, _NORMAL, ua, time, raw, keep=keep), ua

    def delete_op(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> tuple[EdgeWrite, int]:
        id1, id2 = check_id(id1, "id1"), check_id(id2, "id2")
        kind = self._engine.assoc_type(atype)
        ua = self._engine.stamp(updated_at)
        inverse = self._engine.inverse_id(kind)
        # The merge places the tombstone at the time of the edge it removes
        # (`core.merge`); until one is seen, at the deletion's own time.
        return EdgeWrite(kind.id, inverse, id1, id2, _REMOVED, ua, time=ua // 1000), ua

    def state_op(
        self, id1: int, atype: str, id2: int, state: int, updated_at: int | None
    ) -> tuple[EdgeWrite, int]:
        id1, id2 = check_id(id1, "id1"), check_id(id2, "id2")
        kind = self._engine.assoc_type(atype)
        ua = self._engine.stamp(updated_at)
        inverse = self._engine.inverse_id(kind)
        return EdgeWrite(kind.id, inverse, id1, id2, int(state), ua, keep=True), ua

    def change_type_op(
        self, id1: int, atype: str, id2: int, new_atype: str, updated_at: int | None = None
    ) -> tuple[TypeChange, int]:
        id1, id2 = check_id(id1, "id1"), check_id(id2, "id2")
        old, new = self._engine.assoc_type(atype), self._engine.assoc_type(new_atype)
        if old.id == new.id:
            raise InvalidRequest(f"the association is already of type {old.name!r}")
        ua = self._engine.stamp(updated_at)
        engine = self._engine
        op = TypeChange(
            old.id, engine.inverse_id(old), new.id, engine.inverse_id(new), id1, id2, ua
        )
        return op, ua

    def not_found(self, op: TypeChange) -> NotFound:
        """A type change's NotFound with the type's name (the pure rule knows only ids)."""
        name = self._engine.schema.assoc_by_id(op.old).name
        return NotFound(
            f"no association {op.id1} -> {op.id2} of type {name!r}", id1=op.id1, id2=op.id2
        )

    def bulk_load(
        self,
        edges: Iterable[Sequence[Any]],
        *,
        workers: int | None = None,
        progress: Callable[[int], None] | None = None,
        name: str | None = None,
        first: int = 0,
        last: bool = True,
    ) -> int:
        """See `Graph.bulk_load`. A named load may come in parts (the Client sends one
        per request): `first` is the position of this part's first edge in the whole
        load, and the load is finished (its record deleted) after the `last` part."""
        workers = os.cpu_count() or 1 if workers is None else workers
        _check_load(edges, workers, name, first)
        journal, backend = self._engine.journal, self._engine.backend
        ua, stored = self._engine.clock.now(), first
        if name is not None:  # resume: the same updated_at, past the edges stored
            ua, done = journal.load(name, ua)
            if done > first:
                edges = itertools.islice(edges, done - first, None)
                stored = done
        writer = ShardWriter(backend)
        # Worker processes start once the load proves big, while rows are planned.
        start = functools.partial(writer.start_workers, min(workers, self._engine.shards))
        rounds = Rounds(
            _calling_at(edges, BULK_PARALLEL, start),
            self._resolve_type,
            ua,
            MAX_ASSOC_DATA,
            self._engine.shards,
            BULK_BATCH,
        )

        touched: set[int] = set()  # an unnamed load's shards, made durable at its end

        def written(edges: int, shards: Iterable[int]) -> None:
            """A round is applied: made durable, then recorded as stored."""
            if name is None:
                touched.update(shards)
            else:
                backend.make_durable(sorted(shards))
                journal.load_progress(name, edges)

        in_flight: tuple[int, list[int]] | None = None  # the round the workers apply
        try:
            for batch in rounds:
                writer.write(batch)  # returns once the round before it is applied
                if in_flight is not None:
                    written(*in_flight)
                in_flight = (stored + rounds.edges, list(batch))
                if progress is not None:
                    progress(stored + rounds.edges)
            writer.wait()
            if in_flight is not None:
                written(*in_flight)
            # No journal holds the rows: a load returns once they survive a power loss.
            backend.make_durable(sorted(touched))
        finally:
            writer.close()
            self._engine.forget()  # rows were written around the cache
        if rounds.error is not None:  # every edge before the bad one is stored
            raise _stopped(rounds.error, stored + rounds.edges)
        if name is not None and last:
            journal.load_finished(name)
        return stored - first + rounds.edges

    def _resolve_type(self, name: object) -> tuple[int, int | None]:
        kind = self._engine.assoc_type(name)
        return kind.id, self._engine.inverse_id(kind)


def _calling_at(
    edges: Iterable[Sequence[Any]], n: int, call: Callable[[], None]
) -> Iterator[Sequence[Any]]:
    """The edges, calling `call()` once the first `n` have been read (if there are more)."""
    source = iter(edges)
    yield from itertools.islice(source, n)
    for edge in source:  # runs once at most: the rest goes by `yield from`
        call()
        yield edge
        yield from source


def _check_load(edges: object, workers: object, name: object, first: object) -> None:
    """InvalidRequest for bulk_load arguments it cannot take (before anything is written)."""
    if type(workers) is not int or workers < 1:
        raise InvalidRequest(f"workers must be a positive integer, got {workers!r}")
    if not isinstance(edges, Iterable) or isinstance(edges, (str, bytes, Mapping)):
        raise InvalidRequest(
            f"edges must be an iterable of (id1, atype, id2[, time[, data]]), got {edges!r:.80}"
        )
    if name is not None:
        _check_load_name(name)
    if type(first) is not int or not 0 <= first <= MAX_LOAD_FIRST:
        raise InvalidRequest(
            f"first must be an edge position from 0 to {MAX_LOAD_FIRST:,}, got {first!r}"
        )


def _check_load_name(name: object) -> None:
    """InvalidRequest unless `name` can name a load in the journal."""
    if not isinstance(name, str) or not 0 < len(name) <= MAX_LOAD_NAME:
        raise InvalidRequest(
            f"a load's name must be a string of 1 to {MAX_LOAD_NAME} characters, got {name!r:.80}"
        )
    try:
        name.encode()
    except UnicodeEncodeError:
        raise InvalidRequest(
            f"a load's name must be valid Unicode text, got {name!r:.80}"
        ) from None


def _stopped(exc: AssocdbError, stored: int) -> AssocdbError:
    return type(exc)(
        f"{exc.message}; the load stopped there: the {stored:,} edges before it were "
        "stored (fix it and load the rest, or everything again: with explicit times "
        "nothing stored changes)",
        **{**exc.details, "stored": stored},
    )
