"""A shard's apply in two steps: prepared now, committed (or rolled back) later.

`SQLBackend.apply` is one transaction: BEGIN, read the written keys, merge,
store the changed rows and count deltas (and the change feed's record), COMMIT.
`prepare` runs all of it but the COMMIT and hands back the open transaction,
still holding the shard's write turn. The write pipeline prepares a batch's
shard transactions while the journal's fsync is in flight and commits them
only once that fsync returned (`writes.overlap`): acknowledged still means
journaled first, and the shards' work overlaps the one wait a durable write
cannot avoid. If the journal's commit fails, the prepared transactions are
rolled back: nothing is applied that was not journaled.

A process killed while transactions are prepared leaves them uncommitted:
SQLite's WAL holds no commit frame for them and the next opener ignores
their pages (a server aborts a dead connection's transaction). What the
journal holds, the replay applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

from ..core.merge import Changes, EdgeTuple, NodeRow, ObjRow
from .dialect import Session
from .sql import BULK_ROWS, SQLBackend

__all__ = ["Held", "Prepared", "Turn", "can_prepare", "held_turn", "prepare"]


class Held:
    """A shard's write turn to take (`enter`, once) and give back (`close`: a second
    `close` does nothing). SQLite's `_writing` is one itself; any other engine's
    context manager is wrapped in a `Turn`."""

    __slots__ = ()

    def enter(self) -> Session:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class Turn(Held):
    """A shard's write turn taken (`SQLBackend._writing` entered), given back by `close`
    (once: a second `close` does nothing). An `ExitStack` of one, without its
    bookkeeping: a lone write takes two turns."""

    __slots__ = ("_writing",)

    def __init__(self, writing: AbstractContextManager[Session]) -> None:
        self._writing: AbstractContextManager[Session] | None = writing

    def enter(self) -> Session:
        assert self._writing is not None
        return self._writing.__enter__()

    def close(self) -> None:
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.__exit__(None, None, None)


def held_turn(backend: SQLBackend, shard: int, slow: bool) -> Held:
    """The shard's write turn, to `enter` (`Held`)."""
    writing = backend._writing(shard, slow)
    return writing if isinstance(writing, Held) else Turn(writing)


class Prepared:
    """An open shard transaction holding a leg's merged rows: `commit` or `rollback` it
    once, from the thread that prepared it (a `rollback` after either does nothing)."""

    __slots__ = ("_backend", "_held", "_session", "changes", "finished", "shard")

    def __init__(
        self, backend: SQLBackend, shard: int, held: Held, session: Session, changes: Changes
    ) -> None:
        self._backend = backend
        self._held = held  # the shard's write turn
        self._session = session
        self.shard = shard
        #: What the transaction changes (the cache learns it once committed).
        self.changes = changes
        #: Committed or rolled back: a second `commit` or `rollback` does nothing.
        self.finished = False

    def commit(self) -> Changes:
        """COMMIT; what it changed. On failure it is rolled back (a lost COMMIT may have
        committed: the journal's retry finds the rows stored and changes nothing)."""
        if self.finished:
            raise RuntimeError(f"shard {self.shard}: the prepared transaction has ended")
        self.finished = True
        try:
            self._backend._run(self._session, self.shard, "COMMIT")
        except BaseException:
            self._backend._rollback(self._session, self.shard)
            raise
        finally:
            self._held.close()
        self._backend.change_feed().committed()  # wakes this process's feed readers
        return self.changes

    def rollback(self) -> None:
        """Undo everything the transaction did, and give the shard's write turn back."""
        if self.finished:
            return
        self.finished = True
        try:
            self._backend._rollback(self._session, self.shard)
        finally:
            self._held.close()


def prepare(
    backend: SQLBackend,
    shard: int,
    edges: Sequence[EdgeTuple],
    objects: Sequence[ObjRow],
    nodes: Sequence[NodeRow] = (),
) -> Prepared:
    """`backend.apply` up to its COMMIT: the open transaction (see the module doc).
    (Only local engines prepare, `can_prepare`: SQLite's one writer per shard has no
    deadlocks to run again.)"""
    slow = len(edges) + len(objects) + len(nodes) > BULK_ROWS
    held = held_turn(backend, shard, slow)
    session = held.enter()
    try:
        backend._run(session, shard, backend.dialect.begin)
        changes = backend._apply(session, shard, edges, objects, nodes)
    except BaseException:
        backend._rollback(session, shard)
        held.close()
        raise
    return Prepared(backend, shard, held, session, changes)


def can_prepare(backend: object) -> bool:
    """Whether `backend`'s applies can be prepared: a local SQL engine (SQLite) that is
    writable. Database servers keep `apply` (their shards' commits overlap in a pool,
    and holding a pooled connection per touched shard across the journal's fsync
    would take a batch of 16 shards 16 connections)."""
    return (
        isinstance(backend, SQLBackend)
        and backend.local
        and not getattr(backend, "read_only", False)
    )
