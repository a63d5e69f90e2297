"""Consistency checks: counts against rows, and every edge against its inverse.

A hanging edge (one side written, the other not) is normally completed by
the journal's retries. The checker is the second line: it reads every edge
of a type with an inverse, looks up the mirrored row on the other shard, and
reports rows that are missing or differ. Repair applies, to both sides, the
higher-ranked of the two values under the merge rule, which is the later
write: the same value every replay would converge to.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import msgspec

from ..core.errors import InvalidRequest
from ..core.ids import shard_of
from ..core.merge import EdgeRow, EdgeTuple, edge_rank, user_data
from ..core.ops import Rows, legs
from ..core.records import STATE_NAMES, Assoc, CountMismatch, HangingEdge, VerifyReport
from ..storage.replica_verify import verify_replicas
from .engine import Engine

_PAGE = 1000


class Checks:
    """check_counts, check_inverses, verify_replicas (`Graph` documents each)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._backend = engine.backend
        self._shards = engine.shards

    def check_counts(self, *, repair: bool = False) -> list[CountMismatch]:
        found = [m for shard in range(self._shards) for m in self._backend.recount(shard, repair)]
        if repair and found:
            self._engine.forget()
        return found

    def check_inverses(
        self, *, repair: bool = False, keys: Sequence[tuple[int, int, int]] | None = None
    ) -> list[HangingEdge]:
        """With `keys` (id1, atype, id2), only those edges (those stored) are checked."""
        found: list[HangingEdge] = []
        for page in self._edge_pages() if keys is None else self._pages_of(keys):
            mirrors = self._mirrors(page)
            for row in page:
                other = self._inverse_type(row[1])
                if other is None or (other == row[1] and row[0] == row[2]):
                    continue
                mirror = mirrors.get((row[2], other, row[0]))
                if mirror is not None and mirror[3:] == row[3:]:
                    continue
                found.append(
                    HangingEdge(self._assoc(row), None if mirror is None else self._assoc(mirror))
                )
                if repair:
                    self._repair(row, mirror, other)
        if repair and found:
            self._engine.forget()
        return found

    def verify_replicas(
        self, shards: Sequence[int] | None = None, *, repair: bool = False
    ) -> VerifyReport:
        backend = self._backend.replicated()
        if backend is None:
            raise InvalidRequest("this graph keeps one copy of each shard: no replicas to verify")
        for shard in shards or ():
            if not 0 <= shard < self._shards:
                raise InvalidRequest(f"shard {shard} is outside shards 0-{self._shards - 1}")
        report = verify_replicas(backend, shards, repair=repair)
        if repair and report.differences:
            self._engine.forget()  # a replica that was read may have held a losing row
        return report

    def _edge_pages(self) -> Iterator[list[EdgeRow]]:
        for shard in range(self._shards):
            after = None
            while page := self._backend.export_edges(shard, after, _PAGE):
                yield page
                after = page[-1][:3]

    def _pages_of(self, keys: Sequence[tuple[int, int, int]]) -> Iterator[list[EdgeRow]]:
        wanted: dict[tuple[int, int], set[int]] = {}
        for id1, atype, id2 in keys:
            wanted.setdefault((id1, atype), set()).add(id2)
        page: list[EdgeRow] = []
        for (id1, atype), id2s in wanted.items():
            page += self._backend.edges(shard_of(id1, self._shards), id1, atype, sorted(id2s))
            if len(page) >= _PAGE:
                yield page
                page = []
        if page:
            yield page

    def _mirrors(self, page: list[EdgeRow]) -> dict[tuple[int, int, int], EdgeRow]:
        wanted: dict[tuple[int, int], list[int]] = {}
        for row in page:
            other = self._inverse_type(row[1])
            if other is not None:
                wanted.setdefault((row[2], other), []).append(row[0])
        mirrors = {}
        for (node, atype), id2s in wanted.items():
            for mirror in self._backend.edges(shard_of(node, self._shards), node, atype, id2s):
                mirrors[mirror[:3]] = mirror
        return mirrors

    def _inverse_type(self, atype: int) -> int | None:
        engine = self._engine
        return engine.inverse_id(engine.named(lambda schema: schema.assoc_by_id(atype)))

    def _repair(self, row: EdgeRow, mirror: EdgeRow | None, other: int) -> None:
        best: EdgeTuple = row
        if mirror is not None:
            flipped: EdgeTuple = (row[0], row[1], row[2], *mirror[3:])
            if edge_rank(flipped) > edge_rank(row):
                best = flipped
        state, time, updated_at, data = best[3:]
        rows = Rows(edges=[best, (row[2], other, row[0], state, time, updated_at, data)])
        shards = []
        for leg in legs(rows, self._shards):
            self._backend.apply(leg.shard, leg.edges, leg.objects, leg.nodes)
            shards.append(leg.shard)
        self._backend.make_durable(sorted(set(shards)))  # no journal holds a repair

    def _assoc(self, row: EdgeRow) -> Assoc:
        name = self._engine.named(lambda schema: schema.assoc_by_id(row[1])).name
        raw = user_data(row)
        data = None if raw is None else msgspec.json.decode(raw)
        return Assoc(row[0], name, row[2], row[4], STATE_NAMES[row[3]], row[5], data)
