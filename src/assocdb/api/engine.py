"""GraphCore: what every part of the Graph API shares.

It owns the backend, the clock, the schema (cached, re-read when an unknown
type shows up, changed by compare-and-swap) and the write path:

    validate → stamp `updated_at` → operation → resolve against the current
    row → append to the journal (durable) → apply its legs → answer

An operation that depends on the stored row is resolved when it enters only
if nothing earlier for that row is still queued in this process and the
shard answers; otherwise it is journaled as it is and resolved by the
applier in journal order (see `_applier.Pending`).

`_submit` is that path. In the default synchronous mode the job is applied
before returning (`applied`), or left in the error queue if a leg failed
(`queued`); with `sync=False` it is acknowledged once journaled (`queued`)
and applied by a background thread. Either way the journal holds it until
every leg has been applied.
"""

from __future__ import annotations

import logging
import time as _time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

from ..cache.tier1 import Cache
from ..core.clock import HybridClock
from ..core.entities import maintenance
from ..core.errors import AssocdbError, InvalidRequest, UnknownType
from ..core.ids import shard_of
from ..core.merge import ObjRow, State
from ..core.ops import NodeJob, Operation, Rows, Stored, resolve
from ..core.records import CacheConfig, CacheStats, CountMismatch, HotKey, WriteResult
from ..core.schema import DEFAULT_LIMIT, AssocType, IndexDef, ObjectType, Schema, read_schema_file
from ..storage.backend import Backend
from ..writes.applier import Applier, RetryPolicy, encode, replay
from ..writes.fanout import FanoutJob
from ..writes.journal import Journal

log = logging.getLogger("assocdb")

_SCHEMA_KEY = "schema"
_SCHEMA_RELOAD_SECONDS = 1.0


class GraphCore:
    """Lifecycle, schema and the write path of a Graph."""

    def __init__(
        self,
        backend: Backend,
        journal: Journal,
        *,
        sync: bool = True,
        retry: RetryPolicy | None = None,
        clock: HybridClock | None = None,
        cache: CacheConfig | None = None,
    ) -> None:
        self._backend = backend
        self._cache = None if cache is None else Cache(cache, self._graph_id())
        forget_hooks = getattr(backend, "forget_hooks", None)  # a replicated backend's
        if self._cache is not None and forget_hooks is not None:
            forget_hooks.append(self._cache.forget)
        self._shards = backend.shards
        self._clock = clock or HybridClock()
        self._schema = self._read_schema()
        self._schema_read_at = float("-inf")  # the first unknown type always re-reads
        self._journal = journal
        self._sync = sync
        self._applier = Applier(backend, journal, retry, cache=self._cache)
        self._indexes_read_at = _time.monotonic()
        self._applier.entries = self._with_entries
        if journal.read_only:  # a snapshot: read it, apply nothing
            waiting = sum(journal.counts()[state] for state in ("new", "error", "running"))
            if waiting:
                log.warning(
                    "%s is read-only: %d journaled writes cannot be applied until it is "
                    "writable again (reads do not see them)",
                    journal.path,
                    waiting,
                )
        else:
            replay(self._applier, journal)
            self._applier.start()
        recovery_hooks = getattr(backend, "recovery_hooks", None)  # a replicated backend's
        if recovery_hooks is not None:
            recovery_hooks.append(self._retry_queued)

    # -- lifecycle -------------------------------------------------------------

    def _retry_queued(self) -> None:
        """A backend is back: retry the error queue now rather than after its backoff."""
        self._journal.retry_now()
        self._applier.wake()

    def close(self) -> None:
        """Finish background applies (briefly), then close the journal and connections.

        Jobs not yet applied stay in the journal and are applied on the next open.
        """
        self._applier.stop()
        self._journal.close()
        if self._cache is not None:
            self._cache.close()
        self._backend.close()

    def __enter__(self) -> GraphCore:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def shards(self) -> int:
        """The number of logical shards, fixed when the graph was created."""
        return self._shards

    def trace(self, tracer: Callable[[int, str, float], None]) -> Callable[[], None]:
        """Call `tracer(shard, sql, seconds)` after every SQL statement; returns an undo."""
        self._backend.tracers.append(tracer)
        return lambda: self._backend.tracers.remove(tracer)

    def check_counts(self, *, repair: bool = False) -> list[CountMismatch]:
        """Compare every stored count with a recount of the edges; optionally fix them."""
        found = [m for shard in range(self._shards) for m in self._backend.recount(shard, repair)]
        if repair and found:
            self._forget()
        return found

    def cache_stats(self) -> CacheStats | None:
        """Hits, misses, fills, evictions and memory of the in-process cache (None if off)."""
        return None if self._cache is None else self._cache.stats()

    def hot_keys(self, n: int = 20) -> list[HotKey]:
        """The hottest cache keys, with their shard and estimated requests per second."""
        if type(n) is not int or not 0 < n <= 1000:
            raise InvalidRequest(f"n must be an integer from 1 to 1,000, got {n!r}")
        if self._cache is None:
            return []
        hot = []
        for key, rate in self._cache.hot.top(n):
            parts: tuple[Any, ...] = key  # type: ignore[assignment]
            kind, id = parts[0], parts[1]
            atype = parts[2] if len(parts) > 2 else None
            hot.append(HotKey(kind, id, atype, shard_of(id, self._shards), round(rate, 1)))
        return hot

    def _forget(self) -> None:
        """Drop everything cached: rows changed behind the cache's back (bulk load, repairs)."""
        if self._cache is not None:
            self._cache.flush()

    # -- schema ----------------------------------------------------------------

    @property
    def schema(self) -> Schema:
        """The association and object types defined so far."""
        return self._schema

    def define_assoc(
        self,
        name: str,
        *,
        inverse: str | None = None,
        symmetric: bool = False,
        limit: int = DEFAULT_LIMIT,
    ) -> AssocType:
        """Define an association type (and its inverse); a no-op if already so defined.

        >>> g.define_assoc("follows", inverse="followed_by")
        >>> g.define_assoc("friend", symmetric=True, limit=5000)
        """
        self._change_schema(
            lambda s: s.define_assoc(name, inverse=inverse, symmetric=symmetric, limit=limit)
        )
        return self._schema.assoc_type(name)

    def define_object(self, name: str) -> ObjectType:
        """Define an object type; a no-op if it exists."""
        self._change_schema(lambda s: s.define_object(name))
        return self._schema.object_type(name)

    def load_schema(self, path: str | Path) -> None:
        """Apply every definition in a TOML schema file (see `_schema`)."""
        text = read_schema_file(path)
        self._change_schema(lambda s: s.apply_toml(text))

    def _change_schema(self, change: Callable[[Schema], Schema]) -> None:
        # Compare-and-swap, so two processes defining types at once cannot
        # hand out the same type id.
        while True:
            raw = self._backend.get_meta(_SCHEMA_KEY)
            current = Schema.from_json(raw) if raw else Schema()
            changed = change(current)
            if changed == current or self._backend.swap_meta(_SCHEMA_KEY, raw, changed.to_json()):
                self._schema = changed
                return

    def _graph_id(self) -> str:
        """A stable random id of this graph (keeps graphs apart in a shared Redis)."""
        while True:
            stored = self._backend.get_meta("graph_id")
            if stored is not None:
                return stored.decode()
            self._backend.swap_meta("graph_id", None, uuid.uuid4().hex.encode())

    def _read_schema(self) -> Schema:
        raw = self._backend.get_meta(_SCHEMA_KEY)
        return Schema.from_json(raw) if raw else Schema()

    def _assoc_type(self, name: object) -> AssocType:
        try:
            return self._schema.assoc_type(name)
        except UnknownType:
            if not self._refresh_schema():
                raise
        # Another process may have defined it: ask the schema re-read (outside the
        # handler, so a second miss is one error, not one "during handling of" another).
        return self._schema.assoc_type(name)

    def _object_type(self, name: object) -> ObjectType:
        try:
            return self._schema.object_type(name)
        except UnknownType:
            if not self._refresh_schema():
                raise
        return self._schema.object_type(name)

    def _inverse_id(self, kind: AssocType) -> int | None:
        inverse = self._schema.inverse(kind)
        return None if inverse is None else inverse.id

    def _refresh_schema(self) -> bool:
        """Re-read the schema (another process may have defined a type), at most once a second."""
        now = _time.monotonic()
        if now - self._schema_read_at < _SCHEMA_RELOAD_SECONDS:
            return False
        self._schema_read_at = now
        self._schema = self._read_schema()
        return True

    # -- the write path ------------------------------------------------------------

    def _stamp(self, updated_at: object) -> int:
        return self._clock.now() if updated_at is None else self._clock.accept(updated_at)

    def _submit(self, op: Operation | Rows, updated_at: int) -> WriteResult:
        """Resolve, journal and (in sync mode) apply one write."""
        work: Operation | Rows = op
        if isinstance(op, Rows) or not op.needs_current:
            work = op if isinstance(op, Rows) else resolve(op, Stored())
            if work.objects:
                work = self._with_entries(None, work)
        elif self._sync and not self._applier.pending.blocked(op.keys):
            try:
                current = self._applier.read_current(op)
            except AssocdbError:
                pass  # journaled unresolved, resolved when its shard answers again
            else:
                work = resolve(op, current)  # a rejection (NotFound, Conflict) raises here
                if work.objects:
                    work = self._with_entries(current.row, work)
        # Otherwise an earlier write to the same row is still queued (or this
        # graph applies in the background): resolve in journal order, later.
        job = self._journal.append(encode(work))
        self._applier.pending.add(job, work.keys)
        if not self._sync:
            self._applier.enqueue(job, work)
            return WriteResult("queued", updated_at)
        applied = self._applier.run(job, work)
        return WriteResult("applied" if applied else "queued", updated_at)

    def _with_entries(self, old: ObjRow | None, rows: Rows) -> Rows:
        """`rows` with the secondary index entries its object rows imply (`_entities`).

        Raises InvalidRequest if an object holds a value one of its indexes cannot take.
        """
        self._refresh_indexes()
        entries = list(rows.index)
        for new in rows.objects:
            before = old if old is not None and old.id == new.id else None
            indexes = self._schema.indexes_of(new.otype)
            made = maintenance(indexes, before, new, self._shards)
            for index in indexes:
                if index.unique:
                    for shard, index_id, key, _, _, _, state in made:
                        if index_id == index.id and state == State.NORMAL:
                            self._check_unique(index, key, shard, new.id)
            entries += made
        if len(entries) == len(rows.index):
            return rows
        return msgspec.structs.replace(rows, index=entries)

    def _check_unique(self, index: IndexDef, key: bytes, shard: int, id: int) -> None:
        """Conflict if another live object holds `key` in the unique `index` (`_indexes`)."""

    def _refresh_indexes(self) -> None:
        """Re-read the schema once a second, so indexes defined (or dropped) by another
        process are maintained here too; the cleaner repairs the writes in between."""
        now = _time.monotonic()
        if now - self._indexes_read_at >= _SCHEMA_RELOAD_SECONDS:
            self._indexes_read_at = now
            self._schema = self._read_schema()

    def _submit_background(self, node_job: NodeJob | FanoutJob) -> WriteResult:
        """Journal a long job and let the background threads work through it."""
        job = self._journal.append(encode(node_job))
        self._applier.enqueue(job, node_job)
        return WriteResult("queued", node_job.updated_at)
