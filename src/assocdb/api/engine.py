"""Engine: what every service of a Graph shares, and the seam to what is below.

It owns the backend, the cache, the clock, the journal and its applier, the
schema (cached, re-read whenever a name or id is not in the copy: `named`,
changed by compare-and-swap) and the write path:

    validate → stamp `updated_at` → operation → resolve against the current
    row → append to the journal (durable) → apply its legs → answer

An operation that depends on the stored row is resolved when it enters only
if nothing earlier for that row is still queued in this process and the
shard answers; otherwise it is journaled as it is and resolved by the
applier in journal order (see `writes.pending.Pending`).

`submit` is that path, through the write pipeline (`writes.pipeline`):
writes that enter at the same time, from any thread, share one journal
fsync and one transaction per shard. In the default synchronous mode the
job is applied before returning (`applied`), or left in the error queue if a
leg failed (`queued`); with `sync=False` it is acknowledged once journaled
(`queued`) and applied by a background thread. Either way the journal holds
it until every leg has been applied and is durable (`Applier.fence`).
`submit_many` is the same for a list of writes (`Graph.batch`).

Two steps, because the services are wired in between: building an Engine
reads the schema and nothing more; `start()` replays the journal (jobs a
crash left), starts the applier's threads and registers with a replicated
backend. A replayed object write needs the secondary index entries of
`set_index_entries`, so `Graph.__init__` calls `start()` last.

`Graph.engine` is the one seam for the CLI, the server and the metrics:
`engine.backend` (export, recount, a readiness probe), `engine.replica_health()`
(a shard map's members, without importing storage), and for tests the
journal, applier, cache and clock.
"""

from __future__ import annotations

import logging
import time as _time
import uuid
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple, TypeVar

from ..cache.entries import Tier2
from ..cache.tier1 import Cache
from ..core.clock import HybridClock
from ..core.errors import AssocdbError, NotFound, UnknownType
from ..core.merge import ObjRow
from ..core.ops import NodeJob, Operation, Rows
from ..core.records import CacheConfig, WriteResult
from ..core.schema import AssocType, ObjectType, Schema
from ..storage.backend import Backend
from ..storage.replica_verify import last_run
from ..storage.shardmap import MemberStatus
from ..writes.applier import Applier, RetryPolicy, encode, replay
from ..writes.fanout import FanoutJob
from ..writes.journal import Journal
from ..writes.pipeline import Pipeline
from .kept import KeptAnswers

log = logging.getLogger("assocdb")

_SCHEMA_KEY = "schema"
_SCHEMA_RELOAD_SECONDS = 1.0
T = TypeVar("T")

#: `entries(stored row or None, rows, owner) -> rows`: the rows with the secondary
#: index entries their object rows imply (the Indexes service's `entries`), the unique
#: ones claimed for `owner` (`writes.claims`).
IndexEntries = Callable[[ObjRow | None, Rows, Hashable], Rows]


class ReplicaHealth(NamedTuple):
    """The members of a replicated backend (a shard map), as the metrics report them."""

    members: list[MemberStatus]  # name, up, drained, failures, downs, …
    failovers: int  # reads answered by another replica after one failed, since start
    last_verify: dict[str, Any] | None = None  # the last replica verify's figures (if any)


class Engine:
    """Lifecycle, schema and the write path of a Graph; see the module doc."""

    def __init__(
        self,
        backend: Backend,
        journal: Journal,
        *,
        sync: bool = True,
        retry: RetryPolicy | None = None,
        clock: HybridClock | None = None,
        cache: CacheConfig | None = None,
        tier2: Tier2 | None = None,
        cache_clock: Callable[[], float] = _time.monotonic,
    ) -> None:
        self.backend = backend
        self.cache = None
        if cache is not None:
            answers = KeptAnswers(lambda: self.schema)
            # Another process's writes to a SQLite graph are signalled (`changesignal`).
            signal = getattr(backend, "signal", None)
            self.cache = Cache(
                cache,
                self._graph_id(),
                answers=answers,
                tier2=tier2,
                clock=cache_clock,
                foreign=None if signal is None else signal.foreign,
            )
        if self.cache is not None:
            backend.forget_hooks.append(self.cache.forget)
        self.shards = backend.shards
        self.clock = clock or HybridClock()
        self.schema = self.read_schema()
        self.journal = journal
        self.sync = sync
        self.applier = Applier(
            backend,
            journal,
            retry,
            cache=self.cache,
            observe=self.clock.observe,
            entries=self.index_entries,
        )
        self.pipeline = Pipeline(self.applier, sync=sync, now=self.clock.now)
        self._indexes_read_at = _time.monotonic()
        self._entries: IndexEntries | None = None
        self._started = False

    # -- lifecycle -------------------------------------------------------------

    def set_index_entries(self, entries: IndexEntries) -> None:
        """Add `entries(stored row, rows, owner)` to every object write, here and in the applier."""
        if self._started:
            raise RuntimeError("set the index entries before start(): a replay needs them")
        self._entries = entries

    def index_entries(self, stored: ObjRow | None, rows: Rows, owner: Hashable) -> Rows:
        """The rows with the secondary index entries their object rows imply (the
        applier's `entries`): as they are until `set_index_entries`."""
        if self._entries is None:
            return rows
        return self._entries(stored, rows, owner)

    def start(self) -> None:
        """Replay what a crash left in the journal and start applying in the background."""
        if self._started:
            return
        self._started = True
        journal = self.journal
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
            replay(self.applier, journal)
            self.applier.start()
        self.backend.recovery_hooks.append(self._retry_queued)

    def _retry_queued(self) -> None:
        """A backend is back: retry the error queue now rather than after its backoff."""
        self.journal.retry_now()
        self.applier.wake()

    def close(self) -> None:
        """Finish background applies (briefly), then close the journal and connections."""
        self.pipeline.close()
        self.applier.stop()
        self.journal.close()
        if self.cache is not None:
            self.cache.close()
        self.backend.close()

    def forget(self) -> None:
        """Drop everything cached: rows changed behind the cache's back (bulk load, repairs)."""
        if self.cache is not None:
            self.cache.flush()

    def replica_health(self) -> ReplicaHealth | None:
        """The members of a shard map and its read failovers; None for a plain backend."""
        backend = self.backend.replicated()
        if backend is None:
            return None
        try:
            verified = last_run(backend)
        except AssocdbError:  # shard 0 unreadable: the members' own metrics say why
            verified = None
        return ReplicaHealth(backend.status(), backend.failovers, verified)

    # -- schema ----------------------------------------------------------------

    def change_schema(self, change: Callable[[Schema], Schema]) -> None:
        # Compare-and-swap, so two processes defining types at once cannot
        # hand out the same type id.
        while True:
            raw = self.backend.get_meta(_SCHEMA_KEY)
            current = Schema.from_json(raw) if raw else Schema()
            changed = change(current)
            if changed == current or self.backend.swap_meta(_SCHEMA_KEY, raw, changed.to_json()):
                self.schema = changed
                return

    def _graph_id(self) -> str:
        """A stable random id of this graph (keeps graphs apart in a shared Redis)."""
        while True:
            stored = self.backend.get_meta("graph_id")
            if stored is not None:
                return stored.decode()
            self.backend.swap_meta("graph_id", None, uuid.uuid4().hex.encode())

    def read_schema(self) -> Schema:
        """The stored schema (this engine's copy is not changed)."""
        raw = self.backend.get_meta(_SCHEMA_KEY)
        return Schema.from_json(raw) if raw else Schema()

    def reload_schema(self) -> Schema:
        """Re-read the schema now (a type id or index this process has not seen)."""
        self.schema = self.read_schema()
        return self.schema

    def named(self, lookup: Callable[[Schema], T]) -> T:
        """`lookup(schema)`: a type, index or type id looked up in the schema. A name or
        id this process does not know (UnknownType, NotFound, KeyError) may have been
        defined by another process: the schema is re-read (one keyed read) before
        the lookup's refusal is believed, every time, so no write or read is
        refused for a definition acknowledged elsewhere."""
        try:
            return lookup(self.schema)
        except (UnknownType, NotFound, KeyError):
            pass
        # Outside the handler, so a second miss is one error, not one "during handling of".
        return lookup(self.reload_schema())

    def assoc_type(self, name: object) -> AssocType:
        # Every read and write resolves its type here: the known name takes one dict
        # lookup, no closure (`named` is the same rule, for the rarer lookups).
        found = self.schema.assoc_by_name(name)
        return found if found is not None else self.named(lambda s: s.assoc_type(name))

    def object_type(self, name: object) -> ObjectType:
        return self.named(lambda schema: schema.object_type(name))

    def inverse_id(self, kind: AssocType) -> int | None:
        inverse = self.schema.inverse(kind)
        return None if inverse is None else inverse.id

    def refresh_indexes(self) -> None:
        """Re-read the schema once a second, so indexes defined (or dropped) by another
        process are maintained here too; the cleaner repairs the writes in between."""
        now = _time.monotonic()
        if now - self._indexes_read_at >= _SCHEMA_RELOAD_SECONDS:
            self._indexes_read_at = now
            self.reload_schema()

    # -- the write path ------------------------------------------------------------

    def stamp(self, updated_at: object) -> int:
        """`updated_at` as given (checked against the clock), or now."""
        return self.clock.now() if updated_at is None else self.clock.accept(updated_at)

    def submit(
        self, op: Operation | Rows, updated_at: int, *, stamp_on_entry: bool = False
    ) -> WriteResult:
        """Resolve, journal and (in sync mode) apply one write, with whatever other
        writes enter at the same time (`writes.pipeline`). `stamp_on_entry`: node
        rows the store stamps are stamped again as they enter (see `Pipeline.submit`)."""
        outcome, stamp = self.pipeline.submit([op], stamp_on_entry=stamp_on_entry)[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return WriteResult(outcome, updated_at if stamp is None else stamp)

    def submit_many(
        self,
        writes: Sequence[tuple[Operation | Rows, int]],
        sync: bool | None = None,
        low: bool = False,
    ) -> list[WriteResult | BaseException]:
        """`submit` for several writes at once, in order: each one's result, or why it
        was refused (the others go on). `sync` overrides the graph's mode for them:
        False answers `queued` once they are journaled. `low`: background work, which
        gives way to client writes (the pipeline's low lane)."""
        answers = self.pipeline.submit([op for op, _ in writes], sync, low=low)
        return [
            outcome
            if isinstance(outcome, BaseException)
            else WriteResult(outcome, updated_at if stamp is None else stamp)
            for (outcome, stamp), (_, updated_at) in zip(answers, writes, strict=True)
        ]

    def submit_background(self, node_job: NodeJob | FanoutJob) -> WriteResult:
        """Journal a long job and let the background threads work through it."""
        job = self.journal.append(encode(node_job))
        self.applier.enqueue(job, node_job)
        return WriteResult("queued", node_job.updated_at)
