"""Reading the stored rows that resolving operations needs (`CurrentRows`)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from ..core.errors import AssocdbError
from ..core.ids import shard_of
from ..core.merge import EdgeKey, NodeRow
from ..core.ops import ListKey, ObjectWrite, Operation, RowKey, Stored
from ..storage.backend import Backend
from ..storage.opened import read_stored
from ..storage.sql import SQLBackend
from .shards import ShardWriter


class _Wanted:
    """The stored rows one shard is asked for, to resolve a batch of operations."""

    __slots__ = ("edges", "lists", "objects")

    def __init__(self) -> None:
        self.edges: set[EdgeKey] = set()
        self.objects: set[int] = set()
        self.lists: set[ListKey] = set()


class CurrentRows:
    """Reads what resolving operations needs, one call per shard and kind, each
    read reported to its shard's circuit breaker (`ShardWriter.read`)."""

    def __init__(self, backend: Backend, shards: ShardWriter) -> None:
        self.backend = backend
        self.shards = shards

    def one(self, op: Operation) -> Stored:
        """What resolving `op` needs (see `many`); raises if a shard fails."""
        current = self.many([op])[0]
        if isinstance(current, AssocdbError):
            raise current
        return current

    def many(self, ops: Sequence[Operation]) -> list[Stored | AssocdbError]:
        """What resolving each of `ops` needs: its key's stored row and its lists'
        strongest node state, read with one call per shard and kind; an op whose
        shard could not be read gets that error instead.

        On a shard map, only from replicas that missed none of this process's
        writes of the shard (`fresh_reads`): a later write of a row whose earlier
        write is still queued for some replicas resolves against one that has it.
        """
        n = self.backend.shards
        wanted: dict[int, _Wanted] = {}
        needs: list[tuple[RowKey | None, list[ListKey], list[int]]] = []  # per op
        for op in ops:
            lists = op.node_lists
            touched = []
            for node, atype in lists:
                shard = shard_of(node, n)
                touched.append(shard)
                want = wanted.get(shard)
                if want is None:
                    want = wanted[shard] = _Wanted()
                want.lists.add((node, atype))
            key: RowKey | None = None
            if op.needs_row:
                if isinstance(op, ObjectWrite):
                    key, shard = (op.id,), shard_of(op.id, n)
                    wanted.setdefault(shard, _Wanted()).objects.add(op.id)
                else:
                    key = op.key
                    shard = touched[0] if lists and lists[0][0] == op.id1 else shard_of(op.id1, n)
                    wanted.setdefault(shard, _Wanted()).edges.add(op.key)
                touched.append(shard)
            needs.append((key, lists, touched))
        rows: dict[RowKey, Any] = {}
        states: dict[ListKey, NodeRow] = {}
        failed: dict[int, AssocdbError] = {}
        with self.backend.fresh_reads():
            for shard in sorted(wanted):
                try:
                    self._read_wanted(shard, wanted[shard], rows, states)
                except AssocdbError as exc:
                    failed[shard] = exc
        answers: list[Stored | AssocdbError] = []
        for key, lists, touched in needs:
            if failed:
                error = next((failed[shard] for shard in touched if shard in failed), None)
                if error is not None:
                    answers.append(error)
                    continue
            node_state = 0
            if states:
                node_state = max((states[lst].state for lst in lists if lst in states), default=0)
            answers.append(Stored(None if key is None else rows.get(key), node_state))
        return answers

    def _read_wanted(
        self, shard: int, wanted: _Wanted, rows: dict[RowKey, Any], states: dict[ListKey, NodeRow]
    ) -> None:
        backend = self.backend
        if wanted.edges and wanted.lists and isinstance(backend, SQLBackend) and backend.local:
            # Both in one statement (`storage.opened.read_stored`): a statement less.
            found, found_states = self.shards.read(
                partial(read_stored, backend), shard, sorted(wanted.edges), sorted(wanted.lists)
            )
            rows.update(found)  # type: ignore[arg-type]
            states.update(found_states)
            wanted.edges.clear()
            wanted.lists.clear()
        if wanted.edges:
            for row in self.shards.read(backend.edges_at, shard, sorted(wanted.edges)):
                rows[row[:3]] = row
        if wanted.objects:
            for obj in self.shards.read(backend.objects, shard, sorted(wanted.objects)):
                rows[(obj[0],)] = obj
        if wanted.lists:
            states.update(self.shards.read(backend.node_states, shard, sorted(wanted.lists)))
