"""Running set-arithmetic queries: streams in id2 order, batched probes, cheap plans.

Every query can do three things:

* `stream(q, boundary, forward)`: its ids in id2 order (descending when
  forward) past a boundary, lazily. A term reads its list through the
  `(id1, atype, id2)` index in chunks: one index range scan per chunk; or,
  when tier 1 holds its whole small list, from the cache (no statement).
* `probe(q, ids)`: which of `ids` are in it: batched point lookups.
* `upper(q)`: an upper bound on its size, from the stored counts.

Plans follow from these. An intersection walks its smallest operand and
probes the others with each chunk, so the first page of (1M followers ∩ 200
followings) reads about 200 rows of each; warm, the 200 come from the cache
and the page is one statement. A union merges its operands'
streams. A difference walks its left side and probes the right. Pages stop
pulling as soon as they have `limit + 1` ids.

A query that is a single term is paged in its list's own order (`(time,
id2)`, newest first), as `assoc_page` does, with several states merged.

A term of a type with a ttl (`core.ttl`) leaves its expired edges out: its
list-order scans are bounded by time, and its id2-order reads and probes are
checked against the edges' times (`_unexpired`); its count is the visible one.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..cache.entries import SMALL_LIST
from ..core import cursor as _cursor
from ..core.errors import InvalidRequest
from ..core.ids import by_shard, shard_of
from ..core.merge import State
from ..core.query import Compound, Difference, Intersect, Lists, Query, Runner, Term, Union
from ..core.records import STATE_NAMES, Assoc, Count, Page, StateName
from ..core.scans import EdgeScan, IdsJoin, IdsProbe, ListsUnions, ShortProbe
from ..core.schema import AssocType
from ..storage.backend import Backend
from . import lists_plan
from .engine import Engine
from .query_terms import Resolutions, Typed, Where
from .ttl_reads import Expiry

CHUNK = 500  # ids per index scan and per probe
EXACT_LIMIT = 10_000  # a compound count walks at most this many ids to be exact
_NORMAL = State.NORMAL
_ID2S = "id2s"  # the answer tag of a whole small cached list's id2s, ascending
_VISIBLE = (int(_NORMAL),)  # the state codes of a term on visible edges


class Queries:
    """select (`Graph` documents it), and running the queries built from it: their
    runner (the Graph, as a Client is for its queries) sends them to `page` and `count`."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._resolved = Resolutions(engine)
        self._expiry = Expiry(engine)

    def select(
        self,
        runner: Runner,
        node: int | Iterable[int] | Query,
        atype: str,
        incoming: bool,
        states: Sequence[StateName],
        id2s: Iterable[int] | None,
    ) -> Query:
        # Unknown types and missing inverses are refused now.
        if type(node) is int:
            query = Term(runner, node, atype, incoming, states, id2s)
            self._resolved.where(query)
            return query
        lists = Lists(runner, node, atype, incoming, states, id2s)  # type: ignore[arg-type]
        lists.resolved = (self._engine.schema, self._resolved.typed(lists))
        return lists

    def _executor(self) -> _Executor:
        return _Executor(self._engine, self._resolved, self._expiry)

    def page(self, query: Query, cursor: str | None, limit: int) -> Page[int]:
        if type(limit) is not int or limit <= 0:
            raise InvalidRequest(f"limit must be a positive integer, got {limit!r}")
        run = self._executor()
        kind = type(query)
        if kind is Difference or kind is Intersect:  # (the usual compound: few steps)
            pair = run.pair(query)  # type: ignore[arg-type]
            if pair is not None:
                return run.pair_page(query, pair, cursor, limit)  # type: ignore[arg-type]
        limit = min(limit, run.limit(query))
        if isinstance(query, Term):
            seek = _cursor.START if cursor is None else _cursor.decode(query.scope, cursor, 2)
            rows, after, before = _cursor.paginate(
                lambda s, n: run.term_in_list_order(query, s, n),
                lambda row: row,
                query.scope,
                seek,
                limit,
            )
            return Page([id2 for _, id2 in rows], after, before)
        seek = _cursor.START if cursor is None else _cursor.decode(query.scope, cursor, 1)
        ids, after, before = _cursor.paginate(
            lambda s, n: run.take(query, s, n),
            _id_key,
            lambda: query.scope,
            seek,
            limit,
        )
        return Page(ids, after, before)

    def rows(self, query: Term, seek: _cursor.Seek, n: int) -> list[tuple[int, int]]:
        """Up to `n` `(time, id2)` of a term in its list's order from `seek`: what
        FlockDB's position cursors page over (`flock/`)."""
        return self._executor().term_in_list_order(query, seek, n)

    def edges(self, query: Term, id2s: Sequence[int]) -> list[Assoc]:
        """The stored edges of a term's list to `id2s` (any state, none expired), in no order."""
        run = self._executor()
        kind = run.kind(query)
        rows = self._engine.backend.edges(
            shard_of(query.node, self._engine.shards), query.node, kind.id, list(id2s)
        )
        low = -(2**63) if kind.ttl is None else Expiry(self._engine).low(kind)
        return [
            Assoc(r.id1, kind.name, r.id2, r.time, STATE_NAMES[r.state], r.updated_at)
            for r in rows
            if r.time >= low
        ]

    def count(self, query: Query) -> Count:
        run = self._executor()
        if isinstance(query, (Compound, Lists)):  # a page's plans, exact if they find few ids
            found = run.members(query, EXACT_LIMIT + 1)
            if found is not None and found <= EXACT_LIMIT:
                return Count(found, exact=True)
        bound = run.upper(query)
        if isinstance(query, Term) or bound == 0:
            return Count(bound, exact=True)
        if bound > EXACT_LIMIT:
            return Count(bound, exact=False)
        return Count(sum(1 for _ in run.stream(query, None, True)), exact=True)


#: A compound's two plain terms and where their lists are (`_Executor.pair`).
_Pair = tuple[Term, Term, Where, Where]


class _Executor:
    """One query run: backend reads, with the counts it looked up remembered."""

    def __init__(self, engine: Engine, resolved: Resolutions, expiry: Expiry) -> None:
        self._engine = engine
        self._backend = engine.backend
        self._resolved = resolved
        self._schema = engine.schema  # (a run resolves its terms against one schema)
        self._expiry = expiry
        self._uppers: dict[int, int] = {}  # by id() of the query: they all outlive the run
        self._nodes: dict[int, tuple[int, ...]] = {}  # a many-list term's nodes, by id()
        self.expansions: dict[int, Query | None] = {}  # its terms (`lists_plan.expanded`)

    @property
    def backend(self) -> Backend:
        return self._backend

    @property
    def shards(self) -> int:
        return self._engine.shards

    # -- resolving terms against the schema ----------------------------------------

    def kind(self, q: Term) -> AssocType:
        """The type of the list a term reads (the inverse type when incoming)."""
        return self.where(q).kind

    def limit(self, q: Query) -> int:
        """The most ids one page returns: the smallest type limit involved."""
        if isinstance(q, Term):
            return self.where(q).kind.limit
        if isinstance(q, Lists):
            return self.typed(q)[2].limit
        assert isinstance(q, Compound)
        least = self.limit(q.parts[0])
        for part in q.parts[1:]:  # (not min() of a generator: ~1 µs of a short page)
            least = min(least, self.limit(part))
        return least

    def where(self, q: Term) -> Where:
        """The term's shard, list type id and state numbers (and type): its memo, read
        here (a page of two lists asks ~7 times: each call less is ~0.2 µs)."""
        memo = q.resolved
        if memo is not None and memo[0] is self._schema:
            found: Where = memo[1]
            return found
        return self._resolved.where(q)

    def typed(self, q: Lists) -> Typed:
        """A many-list term's type id, state numbers and type: its memo, as `where`'s."""
        memo = q.resolved
        if memo is not None and memo[0] is self._schema:
            found: Typed = memo[1]
            return found
        typed = self._resolved.typed(q)
        q.resolved = (self._schema, typed)
        return typed

    def plain_ids(self, q: Term, n: int) -> list[int] | None:
        """Up to `n` ids of a term of a plain list (no id2s, no ttl), ascending, or None:
        kept by tier 1 or one statement."""
        typed = self._plain(q)
        if typed is None:
            return None
        w = self.where(q)
        if self._engine.cache is not None and w.codes == _VISIBLE:
            kept: tuple[int, ...] | None = self._engine.cache.answer((q.node, w.atype), _ID2S)
            if kept is not None:
                return list(kept[:n])
        rows = self._backend.scan_id2(w.shard, q.node, w.atype, w.codes, None, False, n)
        return [row[0] for row in rows]

    def nodes(self, q: Lists) -> tuple[int, ...]:
        """A many-list term's nodes: its ids, or its query's, read once per run."""
        if not isinstance(q.nodes, Query):
            return q.nodes
        found = self._nodes.get(id(q))
        if found is None:
            found = self._nodes[id(q)] = lists_plan.nodes_of(self, q.nodes)
        return found

    # -- terms -----------------------------------------------------------------------

    def term_in_list_order(self, q: Term, seek: _cursor.Seek, n: int) -> list[tuple[int, int]]:
        """Up to n `(time, id2)` of a term, in its list's order from `seek`."""
        if q.id2s is not None:
            return self._restricted_in_list_order(q, seek, n)
        shard, atype, codes, kind = self.where(q)
        low = None if kind.ttl is None else self._expiry.low(kind)
        scan = self._backend.scan_keys
        runs = [scan(shard, EdgeScan(q.node, atype, s, seek, n, None, low)) for s in codes]
        if len(runs) == 1:
            return runs[0]
        merged = heapq.merge(*runs, reverse=seek.forward)
        return list(itertools.islice(merged, n))

    def _restricted_in_list_order(
        self, q: Term, seek: _cursor.Seek, n: int
    ) -> list[tuple[int, int]]:
        assert q.id2s is not None
        shard, atype, codes, kind = self.where(q)
        rows = self._backend.edges(shard, q.node, atype, list(q.id2s))
        low = -(2**63) if kind.ttl is None else self._expiry.low(kind)
        keys = sorted(
            ((r.time, r.id2) for r in rows if r.state in codes and r.time >= low),
            reverse=seek.forward,
        )
        if seek.boundary is not None:
            keys = [k for k in keys if _past(k, seek)]
        return keys[:n]

    def probe(self, q: Query, ids: list[int]) -> set[int]:
        """Which of `ids` are in `q`."""
        if not ids:
            return set()
        if isinstance(q, Term):
            return set(self._probe_term(q, ids, True))
        if isinstance(q, Lists):
            terms = lists_plan.expanded(self, q)
            return set() if terms is None else self.probe(terms, ids)
        if isinstance(q, Intersect):
            found = set(ids)
            for part in self._by_size(q):
                found = self.probe(part, [i for i in ids if i in found])
            return found
        if isinstance(q, Union):
            found = set()
            for part in q.parts:
                found |= self.probe(part, [i for i in ids if i not in found])
            return found
        assert isinstance(q, Difference)
        left = self.probe(q.left, ids)
        return left - self.probe(q.right, [i for i in ids if i in left])

    def _probe_term(
        self,
        q: Term,
        ids: list[int],
        forward: bool,
        limit: int | None = None,
        ordered: bool = False,
    ) -> list[int]:
        """Those of `ids` in the term, in id2 order (descending if `forward`), at most
        `limit`: one covering read of the list's `(id1, atype, id2)` index per 500.
        `ordered`: `ids` are distinct and in that order already (a stream's)."""
        wanted = ids if q.id2s is None else [i for i in ids if i in q.id2s]
        if not wanted:
            return []
        shard, atype, codes, kind = self.where(q)
        if kind.ttl is not None:
            found = sorted(self._unexpired(q, wanted), reverse=forward)
            return found if limit is None else found[:limit]
        if ordered:
            probe = IdsProbe(q.node, atype, codes, wanted, forward, limit)
            return self._backend.set_ids(shard, probe)
        return self._backend.probe_id2s(shard, q.node, atype, codes, wanted, forward, limit)

    def _unexpired(self, q: Term, ids: list[int]) -> list[int]:
        """Those of `ids` whose edge is in the term's states and has not expired (a
        term of a type with a ttl: its index in id2 order does not hold the time)."""
        shard, atype, codes, kind = self.where(q)
        low = self._expiry.low(kind)
        rows = self._backend.edges(shard, q.node, atype, ids)
        return [r.id2 for r in rows if r.state in codes and r.time >= low]

    # -- streams in id2 order ---------------------------------------------------------

    def take(self, q: Query, seek: _cursor.Seek, n: int) -> list[int]:
        """Up to `n` ids of `q` from `seek`: a page's scan."""
        boundary = _boundary(seek)
        few = self._few_statements(q, boundary, seek.forward, n)
        if few is not None:
            return few
        return self._take_streamed(q, boundary, seek.forward, n)

    def pair_page(
        self, q: Difference | Intersect, pair: _Pair, cursor: str | None, limit: int
    ) -> Page[int]:
        """A page of a difference or intersection of two plain lists (`pair`): `page`
        and `take` in one step, the plan of few statements (`_two_lists`) straight
        from the page, the streamed one when it has none. Its ids, cursors and errors
        are `page`'s: the same steps, without the layers every other query takes (a
        page of a node's two lists is one statement, and the Python around it was
        half the call: issue 43)."""
        a, b = pair[2], pair[3]
        n = min(limit, a.kind.limit, b.kind.limit)
        if cursor is None:
            seek, boundary = _cursor.START, None
        else:
            seek = _cursor.decode(q.scope, cursor, 1)
            boundary = _boundary(seek)
        ids = self._two_lists(q, pair, boundary, seek.forward, n + 1)
        if ids is None:
            ids = self._take_streamed(q, boundary, seek.forward, n + 1)
        found, after, before = _cursor.page_of(ids, _id_key, lambda: q.scope, seek, n)
        return Page(found, after, before)

    def _take_streamed(self, q: Query, boundary: int | None, forward: bool, n: int) -> list[int]:
        """Up to `n` ids of `q` past `boundary` by the general plan, its streams. An
        intersection's come a probe's survivors at a time, not each through the
        generators of a stream."""
        if not isinstance(q, Intersect):
            return list(itertools.islice(self.stream(q, boundary, forward, n), n))
        taken: list[int] = []
        for found in self._intersection(q, boundary, forward, n):
            taken += found
            if len(taken) >= n:
                del taken[n:]
                break
        return taken

    def members(self, q: Compound | Lists, n: int) -> int | None:
        """How many ids `q` has, when a page's plan of few statements reads them
        (`_few_statements`), counting at most `n`; None when it has no such plan. A
        union's ids are read in no order, as a hand-written `count(DISTINCT ...)` does."""
        found = self._few_statements(q, None, True, n, ordered=False)
        return None if found is None else min(len(found), n)

    def _few_statements(
        self, q: Query, boundary: int | None, forward: bool, n: int, ordered: bool = True
    ) -> list[int] | None:
        """A page's ids of the usual compounds of plain lists (no id2 restriction, no
        ttl) in as few statements as a hand-written query would take, or None (the
        general plan): two lists of one shard joined in one statement; the union of
        many lists with one statement per shard; an intersection whose first operand
        is short (or, uncached, its second), as one read of it and one probe of the
        other: no count is read to choose (with the cache on, one shard's two lists
        are joined from the smaller, by the counts tier 1 mostly holds)."""
        if isinstance(q, (Union, Lists)):
            return self._union_of_lists(q, boundary, forward, n, ordered)
        if not isinstance(q, (Difference, Intersect)):
            return None
        pair = self.pair(q)
        return None if pair is None else self._two_lists(q, pair, boundary, forward, n)

    def pair(self, q: Difference | Intersect) -> _Pair | None:
        """The two terms of a compound of two plain lists (no id2 restriction, no ttl)
        and where their lists are, or None."""
        parts = q.parts
        if len(parts) != 2:
            return None
        left, right = parts
        if type(left) is not Term or type(right) is not Term:
            return None
        if left.id2s is not None or right.id2s is not None:
            return None
        a, b = self.where(left), self.where(right)
        if a.kind.ttl is not None or b.kind.ttl is not None:
            return None
        return left, right, a, b

    def _two_lists(
        self, q: Difference | Intersect, pair: _Pair, boundary: int | None, forward: bool,
        n: int,
    ) -> list[int] | None:  # fmt: skip
        """`_few_statements` of a compound of two plain lists (`pair`)."""
        left, right, a, b = pair
        keep = type(q) is Intersect
        if a.shard == b.shard:
            if keep and self._engine.cache is None:  # the counts would be two statements:
                found = self._short_probe(left, a, right, b, boundary, forward, n)  # ids first
                if found is not None:
                    return found
            if keep and self.upper(right) < self.upper(left):  # walk the smaller
                (left, right), (a, b) = (right, left), (b, a)
            join = IdsJoin(
                left.node, a.atype, a.codes, right.node, b.atype, b.codes, keep,
                boundary, forward, n,
            )  # fmt: skip
            return self._backend.set_ids(a.shard, join)
        if not keep:
            # The general plan: a difference reads the left side's chunks and probes
            # the right (two statements); warm lists come from the cache.
            return None
        return self._cross_shards(left, right, a, b, boundary, forward, n)

    def _cross_shards(
        self, left: Term, right: Term, a: Where, b: Where, boundary: int | None,
        forward: bool, n: int,
    ) -> list[int] | None:  # fmt: skip
        """A page of the intersection of two lists on different shards: a read of a
        short one (or of the ids tier 1 keeps) and a probe of the other, or None."""
        ids = kept = None
        if self._engine.cache is not None:
            ids = self._kept_id2s(left, a, boundary, forward)
            kept = self._kept_id2s(right, b, boundary, forward)
        if ids is not None and kept is not None:
            inside = set(kept)
            return [i for i in ids if i in inside][:n]
        if kept is not None:  # the right side is small and in tier 1: probe the left
            return self._probe_term(left, kept, forward, n, ordered=True)
        if ids is not None:  # the left side is, not the right
            return self._probe_term(right, ids, forward, n, ordered=True)
        found = self._short_probe(left, a, right, b, boundary, forward, n)
        if found is not None or self._engine.cache is not None:
            return found  # (None: long; the plan from the counts, tier 1 has them)
        # Uncached: is the right side short? (a read, not two of the counts; both long:
        # None, the plan from the counts)
        return self._short_probe(right, b, left, a, boundary, forward, n)

    def _short_probe(
        self, q: Term, w: Where, other: Term, o: Where, boundary: int | None, forward: bool,
        n: int,
    ) -> list[int] | None:  # fmt: skip
        """The first `n` ids past `boundary` of `q`'s list that are in `other`'s, when the
        list is shorter than a page's first read (`_first`), or None when it is longer:
        two statements, the list's ids handed from one to the other by the backend."""
        probe = ShortProbe(
            q.node, w.atype, w.codes, o.shard, other.node, o.atype, o.codes, boundary,
            forward, _first(n), n,
        )  # fmt: skip
        return self._backend.probe_short(w.shard, probe)

    def _kept_id2s(
        self, q: Term, w: Where, boundary: int | None, forward: bool
    ) -> list[int] | None:
        """The ids past `boundary` (descending if `forward`) of a small list whose whole
        id2s tier 1 keeps from an earlier query, or None: no statement, and no fill."""
        cache = self._engine.cache
        if cache is None or w.codes != _VISIBLE:
            return None
        kept: tuple[int, ...] | None = cache.answer((q.node, w.atype), _ID2S)
        if kept is None:
            return None
        if boundary is None:
            return list(kept[::-1] if forward else kept)
        if forward:
            return list(kept[: bisect.bisect_left(kept, boundary)][::-1])
        return list(kept[bisect.bisect_right(kept, boundary) :])

    def _union_of_lists(
        self, q: Union | Lists, boundary: int | None, forward: bool, n: int, ordered: bool = True
    ) -> list[int] | None:
        """The first `n` ids of a union of lists of one type (a two-hop reach: the lists
        of someone's followees, as terms or one many-list term): the first `n` of each
        shard's, one statement each; None for any other union. Not `ordered`: its ids in
        no order, all of them if no shard has `n` (a count's). One pass over the lists:
        a reach has tens of them, and each step per list was ~1 µs of it."""
        nodes: dict[int, list[int]] = {}
        found: set[int] = set()
        first: Typed | None = None
        for part in q.parts if isinstance(q, Union) else (q,):
            typed = self._plain(part)
            if typed is None:
                return None
            if first is None:
                first = typed
            elif typed[0] != first[0] or typed[1] != first[1]:
                return None
            self._by_shard(part, typed, nodes, found, boundary, forward)  # type: ignore[arg-type]
        if first is None:
            return None
        for ids in self._backend.unions(
            ListsUnions(nodes, first[0], first[1], boundary, forward, n, ordered)
        ):
            found.update(ids)
        return sorted(found, reverse=forward)[:n] if ordered else list(found)

    def _plain(self, q: Query) -> Typed | None:
        """The type of a term or many-list term of plain lists (no id2s, no ttl), or None."""
        if isinstance(q, Lists):
            typed = self.typed(q)
        elif isinstance(q, Term):
            typed = self.where(q)[1:]
        else:
            return None
        return None if q.id2s is not None or typed[2].ttl is not None else typed

    def _by_shard(
        self, q: Term | Lists, typed: Typed, nodes: dict[int, list[int]], found: set[int],
        boundary: int | None, forward: bool,
    ) -> None:  # fmt: skip
        """The nodes of `q`'s lists added to `nodes` by shard, but for a small list whose
        whole id2s tier 1 keeps from an earlier query (visible edges only): its ids past
        `boundary` are added to `found`, and it needs no statement."""
        atype = typed[0]
        kept = self._engine.cache is not None and typed[1] == _VISIBLE
        if isinstance(q, Term):
            if not kept or not self._kept_into(found, q.node, atype, boundary, forward):
                shard = self.where(q).shard
                on = nodes.get(shard)
                if on is None:
                    nodes[shard] = [q.node]
                else:
                    on.append(q.node)
            return
        ids: Sequence[int] = self.nodes(q)
        if kept:
            ids = [i for i in ids if not self._kept_into(found, i, atype, boundary, forward)]
        groups = by_shard(ids, self._engine.shards)
        if not nodes:  # (a many-list term alone, the usual case: its groups as they are)
            nodes.update(groups)
            return
        for shard, group in groups.items():
            on = nodes.get(shard)
            nodes[shard] = group if on is None else on + group

    def _kept_into(
        self, found: set[int], node: int, atype: int, boundary: int | None, forward: bool
    ) -> bool:
        """Whether tier 1 keeps the whole id2s of the small list `(node, atype)` from an
        earlier query; if so, those past `boundary` are added to `found`."""
        cache = self._engine.cache
        assert cache is not None
        cached: tuple[int, ...] | None = cache.answer((node, atype), _ID2S)
        if cached is None:
            return False
        if boundary is None:
            found.update(cached)
        elif forward:  # (ascending)
            found.update(cached[: bisect.bisect_left(cached, boundary)])
        else:
            found.update(cached[bisect.bisect_right(cached, boundary) :])
        return True

    def stream(
        self, q: Query, boundary: int | None, forward: bool, want: int | None = None
    ) -> Iterator[int]:
        """The ids of `q` past `boundary`, descending if `forward`, lazily (`want`: how
        many the caller expects to take, a hint: an intersection probes no further)."""
        if isinstance(q, Term):
            return self._term_stream(q, boundary, forward, want)
        if isinstance(q, Lists):
            return lists_plan.stream(self, q, boundary, forward, _first(want), CHUNK)
        if isinstance(q, Union):
            merged = heapq.merge(
                *(self.stream(p, boundary, forward) for p in q.parts), reverse=forward
            )
            return (id2 for id2, _ in itertools.groupby(merged))
        if isinstance(q, Intersect):
            return itertools.chain.from_iterable(self._intersection(q, boundary, forward, want))
        assert isinstance(q, Difference)
        left = self.stream(q.left, boundary, forward, want)
        return self._filtered(left, [q.right], keep=False, want=want)

    def _term_stream(
        self, q: Term, boundary: int | None, forward: bool, want: int | None = None
    ) -> Iterator[int]:
        if q.id2s is not None:
            ordered = sorted(q.id2s, reverse=forward)
            if boundary is not None:
                ordered = [i for i in ordered if (i < boundary if forward else i > boundary)]
            for chunk in _chunks(iter(ordered), CHUNK):
                found = self.probe(q, chunk)
                yield from (i for i in chunk if i in found)
            return
        for chunk in self._chunked(q, boundary, forward, want):
            yield from chunk

    def _chunked(
        self, q: Query, boundary: int | None, forward: bool, want: int | None = None
    ) -> Iterator[list[int]]:
        """The stream of `q` in lists of up to CHUNK ids: an unrestricted term's are its
        scans' (no id passes through a generator of its own), the first sized from
        `want` (`_first`)."""
        if not isinstance(q, Term) or q.id2s is not None:
            yield from _chunks(self.stream(q, boundary, forward), CHUNK)
            return
        cached = self._cached_id2s(q)
        if cached is not None:
            if boundary is None:
                ordered = cached[::-1] if forward else cached
            elif forward:
                ordered = cached[: bisect.bisect_left(cached, boundary)][::-1]
            else:
                ordered = cached[bisect.bisect_right(cached, boundary) :]
            if 0 < len(ordered) <= CHUNK:  # (a small list's usual case: one copy, not two)
                yield list(ordered)
                return
            for start in range(0, len(ordered), CHUNK):
                yield list(ordered[start : start + CHUNK])
            return
        shard, atype, codes, kind = self.where(q)
        size = _first(want)
        while True:
            rows = self._backend.scan_id2(shard, q.node, atype, codes, boundary, forward, size)
            if rows and kind.ttl is not None:
                alive = set(self._unexpired(q, [row[0] for row in rows]))
                yield [row[0] for row in rows if row[0] in alive]
            elif rows:
                yield [row[0] for row in rows]
            if len(rows) < size:
                return
            boundary, size = rows[-1][0], CHUNK

    def _cached_id2s(self, q: Term) -> tuple[int, ...] | None:
        """The id2s of an unrestricted term on visible edges, ascending, when tier 1
        holds its whole (small) list; None otherwise (read the shard). Kept as one of
        the entry's answers, so a warm read is one dict lookup: a write to the list
        drops its answers, as it does assoc_get's (read-after-write holds)."""
        cache = self._engine.cache
        if cache is None or q.id2s is not None or q.states != ("normal",):
            return None
        shard, atype, _, kind = self.where(q)
        if kind.ttl is not None:  # its ids alone cannot say which have expired
            return None
        key = (q.node, atype)
        found: tuple[int, ...] | None = cache.answer(key, _ID2S)
        if found is not None:
            return found
        if self.upper(q) > min(cache.config.prefix, SMALL_LIST):  # `whole` would say None
            return None

        def load(n: int) -> list[Any]:
            return self._backend.scan(shard, EdgeScan(q.node, atype, _NORMAL, _cursor.START, n))

        filled: list[Any] = []
        with cache.listed(key, load, None, filled) as entry:
            if entry is None:
                return None
            if filled and entry.complete and len(filled[0]) <= SMALL_LIST:
                ids = [row[0] for row in filled[0]]  # the fill's rows: no decode of the prefix
                # (the entry as the fill left it: `listed`)
                before: dict[Any, Any] | None = entry.answers  # type: ignore[assignment]
            else:
                rows = entry.whole()
                if rows is None:
                    return None
                ids = [row[1] for row in rows]
                before = cache.answers(key)  # under the entry's lock: what `rows` came from
        found = tuple(sorted(ids))
        cache.keep(key, before, _ID2S, found, len(found))
        return found

    def _filtered(
        self, ids: Iterator[int], others: Sequence[Query], keep: bool, want: int | None = None
    ) -> Iterator[int]:
        """`ids` that are in all `others` (keep) or in none of them (not keep), chunk by
        chunk, the first sized from `want` (`_first`)."""
        first = list(itertools.islice(ids, _first(want)))
        if first:
            yield from self._survivors(first, others, keep)
        for chunk in _chunks(ids, CHUNK):
            yield from self._survivors(chunk, others, keep)

    def _survivors(self, chunk: list[int], others: Sequence[Query], keep: bool) -> list[int]:
        for other in others:
            found = self.probe(other, chunk)
            chunk = [i for i in chunk if (i in found) == keep]
        return chunk

    def _intersection(
        self, q: Intersect, boundary: int | None, forward: bool, want: int | None
    ) -> Iterator[list[int]]:
        """The ids of `q` past `boundary`, a list of them at a time: its smallest
        operand's chunks (in stream order) that are in all the others. When the last
        one probed is a term, its probe stops at the `want`th survivor, as a join
        would (the ids after that one are probed only if the caller takes more)."""
        driver, *others = self._by_size(q)
        *firsts, last = others
        for chunk in self._chunked(driver, boundary, forward):
            if want is None or not isinstance(last, Term):
                yield self._survivors(chunk, others, keep=True)
                continue
            left = self._survivors(chunk, firsts, keep=True)
            while left:
                found = self._probe_term(last, left, forward, max(want, 1), ordered=True)
                yield found
                if len(found) < max(want, 1):
                    want -= len(found)
                    break
                left = left[left.index(found[-1]) + 1 :]
                want = CHUNK  # the caller took more than it said: probe the rest at once

    # -- sizes ------------------------------------------------------------------------

    def upper(self, q: Query) -> int:
        """An upper bound on the size of `q`; exact for a term."""
        cached = self._uppers.get(id(q))
        if cached is not None:
            return cached
        if isinstance(q, Term):
            if q.id2s is not None:
                bound = len(self.probe(q, list(q.id2s)))
            else:
                shard, atype, codes, kind = self.where(q)
                counts = self._counts(shard, q.node, atype)
                if kind.ttl is not None:  # the visible counts: a term's count is exact
                    counts = [self._expiry.count(q.node, kind, s, n) for s, n in enumerate(counts)]
                bound = counts[codes[0]] if len(codes) == 1 else sum(counts[s] for s in codes)
        elif isinstance(q, Lists):
            terms = lists_plan.expanded(self, q)
            bound = 0 if terms is None else self.upper(terms)
        elif isinstance(q, Intersect):
            bound = min(self.upper(p) for p in q.parts)
        elif isinstance(q, Union):
            bound = sum(self.upper(p) for p in q.parts)
        else:
            assert isinstance(q, Compound)
            bound = self.upper(q.parts[0])
        self._uppers[id(q)] = bound
        return bound

    def _counts(self, shard: int, node: int, atype: int) -> list[int]:
        """A list's counts per state number: from the cache when there is one (as
        `assoc_count` reads them), else one statement."""
        cache = self._engine.cache
        if cache is not None:
            return cache.counts((node, atype), lambda: self._backend.counts(shard, node, atype))
        stored = self._backend.counts(shard, node, atype)
        return [stored.get(state, 0) for state in range(len(STATE_NAMES))]

    def _by_size(self, q: Compound) -> list[Query]:
        """The operands, smallest first: the smallest one is walked, the others probed."""
        return sorted(q.parts, key=self.upper)


def _first(want: int | None) -> int:
    """The size of a stream's first chunk for a caller that expects to take `want` ids
    (None: CHUNK): about twice that, so a page of a difference whose ids mostly
    survive reads and probes ~2x its limit, not CHUNK (issue 43: 500 for a page of
    100 cost ~3x the hand-written query)."""
    return CHUNK if want is None else min(CHUNK, 2 * want + 1)


def _boundary(seek: _cursor.Seek) -> int | None:
    """The id a page in id2 order starts past (exclusive), from its cursor's seek."""
    if seek.boundary is None:
        return None
    boundary = seek.boundary[0]
    if seek.inclusive:  # ids are integers: b inclusive = b±1 exclusive
        boundary += 1 if seek.forward else -1
    return boundary


def _id_key(id2: int) -> tuple[int]:
    """The cursor key of an id in a page in id2 order."""
    return (id2,)


def _chunks(ids: Iterator[int], size: int) -> Iterator[list[int]]:
    while chunk := list(itertools.islice(ids, size)):
        yield chunk


def _past(key: tuple[int, int], seek: _cursor.Seek) -> bool:
    assert seek.boundary is not None
    boundary: Any = seek.boundary
    if seek.forward:
        return key < boundary or (seek.inclusive and key == boundary)
    return key > boundary or (seek.inclusive and key == boundary)
