"""Running many-list terms (`core.query.Lists`): their nodes, their stream, their terms.

A many-list term is the union of one list per node, without an object per
list. A page or count of one (alone or in a union of plain lists of its type)
is `_Executor._union_of_lists`: its nodes grouped by shard (`ids.by_shard`),
one statement per shard holding any of the lists, all in one backend call
(`Backend.unions`). In an intersection or a difference its stream reads those
shards in chunks (`chunks`). What that plan does not cover (an id2
restriction, a type with a ttl, a probe, an upper bound from the counts) runs
as the union of one `Term` per node, built only then (`expanded`).

The nodes of a term given as a query (`g.select(g.select(a, "follows"),
"follows")`: a two-hop reach in one call) are that query's ids, read when the
term runs, once per run: a single term's through its `(id1, atype, id2)` index,
id2 alone, no records.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ..core.errors import InvalidRequest
from ..core.ids import by_shard
from ..core.query import MAX_NODES, Lists, Query, Term
from ..core.scans import ListsUnions
from ..storage.backend import Backend

if TYPE_CHECKING:
    from .queries import _Executor


def nodes_of(run: _Executor, q: Query) -> tuple[int, ...]:
    """The ids of `q`, ascending: the nodes of a many-list term given as a query. A
    plain term's are one read of its key index, id2 alone (no records, no count read,
    no cache fill: ids tier 1 keeps whole from an earlier query are used as they are)."""
    plain = run.plain_ids(q, MAX_NODES + 1) if isinstance(q, Term) else None
    if plain is not None:
        ids = plain
    else:
        ids = list(itertools.islice(run.stream(q, None, False, MAX_NODES + 1), MAX_NODES + 1))
    if len(ids) > MAX_NODES:
        raise InvalidRequest(f"a query of nodes gives at most {MAX_NODES:,} ids; {q!r} has more")
    return tuple(ids)


def expanded(run: _Executor, q: Lists) -> Query | None:
    """The union of one term per node that `q` stands for (None: no nodes), built
    once per run (a probe asks it chunk by chunk)."""
    if id(q) in run.expansions:
        return run.expansions[id(q)]
    nodes, runner, union = run.nodes(q), q._runner, None
    if nodes:
        first, *rest = (Term(runner, n, q.atype, q.incoming, q.states, q.id2s) for n in nodes)
        union = first.union(*rest) if rest else first
    run.expansions[id(q)] = union
    return union


def stream(
    run: _Executor, q: Lists, boundary: int | None, forward: bool, first: int, chunk: int
) -> Iterator[int]:
    """The ids of `q` past `boundary` (descending if `forward`), lazily: by shard
    statements for plain lists, else as the union of its terms."""
    atype, codes, kind = run.typed(q)
    if q.id2s is not None or kind.ttl is not None:
        terms = expanded(run, q)
        return iter(()) if terms is None else run.stream(terms, boundary, forward)
    groups = by_shard(run.nodes(q), run.shards)
    found = chunks(run.backend, groups, atype, codes, boundary, forward, first, chunk)
    return itertools.chain.from_iterable(found)


def chunks(
    backend: Backend,
    groups: dict[int, list[int]],
    atype: int,
    codes: Sequence[int],
    boundary: int | None,
    forward: bool,
    size: int,
    chunk: int,
) -> Iterator[list[int]]:
    """The union of the lists of `groups` (id1s by shard) past `boundary`, in stream
    order, a list of ids at a time: each round reads the next `size` ids of every
    shard that may have more (one statement each) and gives those that no shard's
    unread ids can come before: up to the nearest last id of a shard that filled
    its read (the first round sized for the caller, then `chunk`); the ids read
    beyond it wait for the next round, which reads only the shards that filled."""
    codes = tuple(codes)
    found: set[int] = set()
    while groups:
        edge: int | None = None
        more: dict[int, list[int]] = {}
        scan = ListsUnions(groups, atype, codes, boundary, forward, size)
        for (shard, id1s), ids in zip(groups.items(), backend.unions(scan), strict=True):
            found.update(ids)
            if len(ids) >= size:
                more[shard] = id1s
                last = ids[-1]
                if edge is None or (last > edge if forward else last < edge):
                    edge = last
        ordered = sorted(found, reverse=forward)
        found = set()
        if edge is not None:
            cut = ordered.index(edge)
            found = set(ordered[cut + 1 :])
            ordered = ordered[: cut + 1]
        if ordered:
            yield ordered
        if edge is None:
            return
        groups, boundary, size = more, edge, chunk
