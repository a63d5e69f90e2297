"""Set arithmetic over association lists: FlockDB's select, intersect, union, difference.

A query is a *term*, one association list with a state filter and an
optional id2 restriction (or many lists of one type at once, `Lists`: their
union), or the intersection, union or difference of queries, nested to any
depth:

    both = g.select(1, "follows") & g.select(2, "follows")      # who do 1 and 2 both follow?
    fans = g.select(1, "follows", incoming=True) - g.select(1, "follows")  # not followed back
    page = fans.page(limit=100); more = fans.page(page.next_cursor, limit=100)
    reach = g.select(g.select(1, "follows"), "follows")  # what 1's followees follow

Results are ids, descending: a single term in its list order (newest first,
by `(time, id2)`), a compound query by id2. Pages use keyset cursors like
every other list, scoped to the query, so a cursor of another query is
refused. `count()` is exact when that is cheap (a term, a compound whose own
upper bound is at most 10,000, or one of plain lists a page reads in a few
statements that has at most 10,000 ids: a two-hop reach's union) and otherwise
that bound flagged `exact=False`.

This module is the pure description; `api.queries` runs it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

from .errors import InvalidRequest
from .ids import check_id
from .records import STATE_NAMES, Count, Page

MAX_ID2S = 10_000
MAX_NODES = 10_000  # lists one many-list term names (or its query of nodes gives)

DEFAULT_LIMIT = 50
_NORMAL_ONLY = ("normal",)


class Runner(Protocol):
    """What runs queries: the Graph."""

    def _query_page(self, query: Query, cursor: str | None, limit: int) -> Page[int]: ...
    def _query_count(self, query: Query) -> Count: ...


class Query:
    """A set of ids built from association lists; see the module doc."""

    __slots__ = ("_runner", "_scope")

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self._scope: bytes | None = None

    # -- building ---------------------------------------------------------------

    def intersect(self, *others: Query) -> Query:
        """The ids in this query and in every one of `others`."""
        if len(others) == 1:  # (`a & b`: the checks inline, ~0.5 µs of a short page)
            other = others[0]
            if isinstance(other, Query) and other._runner is self._runner:
                return Intersect(self._runner, (self, other))
        return Intersect(self._runner, self._operands("intersect", others))

    def union(self, *others: Query) -> Query:
        """The ids in this query or in any of `others`."""
        return Union(self._runner, self._operands("union", others))

    def difference(self, other: Query) -> Query:
        """The ids in this query and not in `other`."""
        if not isinstance(other, Query) or other._runner is not self._runner:
            self._operands("difference", (other,))  # (raises)
        return Difference(self._runner, (self, other))

    __and__ = intersect
    __or__ = union
    __sub__ = difference

    def _operands(self, operation: str, others: tuple[object, ...]) -> tuple[Query, ...]:
        if not others:
            raise InvalidRequest(f"{operation} needs at least one other query")
        for other in others:
            if not isinstance(other, Query):
                raise InvalidRequest(f"{operation} takes queries, got {type(other).__name__}")
            if other._runner is not self._runner:
                raise InvalidRequest(f"{operation} takes queries of the same graph")
        return (self, *others)  # type: ignore[arg-type]

    # -- running ------------------------------------------------------------------

    def page(self, cursor: str | None = None, limit: int = DEFAULT_LIMIT) -> Page[int]:
        """One page of ids; pass `next_cursor` (or `prev_cursor`) back for the next."""
        return self._runner._query_page(self, cursor, limit)

    def pages(self, limit: int = 500) -> Iterator[Page[int]]:
        """Every page, first to last."""
        cursor = None
        while True:
            page = self.page(cursor, limit)
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def __iter__(self) -> Iterator[int]:
        """Every id of the result, in order (walking the pages)."""
        for page in self.pages():
            yield from page.items

    def count(self) -> Count:
        """How many ids the query has: exact when cheap, else an upper bound (exact=False)."""
        return self._runner._query_count(self)

    # -- description ----------------------------------------------------------------

    @property
    def scope(self) -> bytes:
        """A canonical description: cursors are bound to it. Described once (a query
        does not change), as every page of it encodes or checks a cursor with it."""
        if self._scope is None:
            self._scope = self._describe()
        return self._scope

    def _describe(self) -> bytes:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.scope.decode()


class Term(Query):
    """One association list: what `node` points to by `atype` (or, `incoming`,
    what points to it), edges in `states`, optionally only `id2s`.

    A term holds names, not resolved types, so a remote client builds the same
    values; the graph checks them when the query runs. `resolved` is its runner's
    memo of what the names stand for (opaque here): a page asks it several times.
    """

    __slots__ = ("atype", "id2s", "incoming", "node", "resolved", "states")
    atype: str
    incoming: bool
    states: tuple[str, ...]
    id2s: tuple[int, ...] | None
    resolved: Any  # its runner's memo

    def __init__(
        self,
        runner: Runner,
        node: int,
        atype: str,
        incoming: bool,
        states: Sequence[str],
        id2s: Iterable[int] | None,
    ) -> None:
        self._runner = runner
        self._scope = None
        if type(node) is not int or not 0 < node < 2**63:  # (check_id's test, inline)
            check_id(node, "node")
        self.node = node
        if (
            type(atype) is str
            and type(incoming) is bool
            and id2s is None
            and type(states) is tuple
            and states == _NORMAL_ONLY
        ):  # (select's usual term, checked inline: ~0.4 µs a term)
            self.atype, self.incoming, self.states, self.id2s = atype, incoming, _NORMAL_ONLY, None
            self.resolved = None
        else:
            _set_lists(self, atype, incoming, states, id2s)

    def _describe(self) -> bytes:
        only = "" if self.id2s is None else f";{','.join(map(str, self.id2s))}"
        direction = "<" if self.incoming else ">"
        return f"t({self.node}{direction}{self.atype},{'+'.join(self.states)}{only})".encode()


class Lists(Query):
    """Many lists of one type at once: the union of the lists of `nodes` by `atype`
    (or, `incoming`, of what points to each), edges in `states`, optionally only
    `id2s` — what the union of one `Term` per node is, without an object per list.

    `nodes` is ids (kept distinct, ascending) or a query whose ids are the nodes,
    read when the query runs (at most MAX_NODES of them): a two-hop reach is
    `g.select(g.select(a, "follows"), "follows")`. Paged by id, like any union.
    """

    __slots__ = ("atype", "id2s", "incoming", "nodes", "resolved", "states")
    atype: str
    incoming: bool
    states: tuple[str, ...]
    id2s: tuple[int, ...] | None
    resolved: Any  # its runner's memo

    def __init__(
        self,
        runner: Runner,
        nodes: Iterable[int] | Query,
        atype: str,
        incoming: bool,
        states: Sequence[str],
        id2s: Iterable[int] | None,
    ) -> None:
        self._runner = runner
        self._scope = None
        if isinstance(nodes, Query):
            if nodes._runner is not runner:
                raise InvalidRequest("select takes a query of nodes of the same graph")
            self.nodes: tuple[int, ...] | Query = nodes
        else:
            self.nodes = _nodes(nodes)
        _set_lists(self, atype, incoming, states, id2s)

    def _describe(self) -> bytes:
        nodes = self.nodes
        named = nodes.scope.decode() if isinstance(nodes, Query) else ",".join(map(str, nodes))
        only = "" if self.id2s is None else f";{','.join(map(str, self.id2s))}"
        direction = "<" if self.incoming else ">"
        return f"m({named}{direction}{self.atype},{'+'.join(self.states)}{only})".encode()


def _set_lists(
    query: Term | Lists,
    atype: str,
    incoming: bool,
    states: Sequence[str],
    id2s: Iterable[int] | None,
) -> None:
    """Check and set what a term and a many-list term share: the lists' type and
    direction, the edges' states and the `id2s` they are restricted to."""
    if not isinstance(atype, str):
        raise InvalidRequest(f"atype must be a type name, got {atype!r}")
    if type(incoming) is not bool:
        raise InvalidRequest(f"incoming must be true or false, got {incoming!r}")
    query.atype = atype
    query.incoming = incoming
    query.states = _states(states)
    query.id2s = None if id2s is None else _restriction(id2s)
    query.resolved = None


class Compound(Query):
    """An operation over queries."""

    __slots__ = ("parts",)
    symbol = "?"

    def __init__(self, runner: Runner, parts: tuple[Query, ...]) -> None:
        self._runner = runner  # (Query's own, without a call: a page builds a few)
        self._scope = None
        self.parts = parts

    def _describe(self) -> bytes:
        return self.symbol.encode() + b"(" + b",".join(p.scope for p in self.parts) + b")"


class Intersect(Compound):
    __slots__ = ()
    symbol = "i"


class Union(Compound):
    __slots__ = ()
    symbol = "u"


class Difference(Compound):
    __slots__ = ()
    symbol = "d"

    @property
    def left(self) -> Query:
        return self.parts[0]

    @property
    def right(self) -> Query:
        return self.parts[1]


def _states(states: object) -> tuple[str, ...]:
    if states == _NORMAL_ONLY and type(states) is tuple:  # select's default: checked
        return _NORMAL_ONLY
    if isinstance(states, str) or not isinstance(states, Sequence) or not states:
        raise InvalidRequest(f"states must be a non-empty list of state names, got {states!r}")
    for state in states:
        if state not in STATE_NAMES:
            raise InvalidRequest(f"state must be one of {', '.join(STATE_NAMES)}; got {state!r}")
    return tuple(sorted(set(states), key=STATE_NAMES.index))


def _nodes(nodes: object) -> tuple[int, ...]:
    """A many-list term's ids, checked, distinct and ascending (its scope is canonical)."""
    if isinstance(nodes, (str, bytes)) or not isinstance(nodes, Iterable):
        raise InvalidRequest(f"node must be an id, a list of ids or a query, got {nodes!r}")
    try:
        found = set(nodes)
    except TypeError:
        raise InvalidRequest("node must be an id, a list of ids or a query") from None
    for node in found:  # (check_id's test, inline: a reach names tens of lists)
        if type(node) is not int or not 0 < node < 2**63:
            check_id(node, "node")
    if len(found) > MAX_NODES:
        raise InvalidRequest(f"at most {MAX_NODES:,} nodes in a query term, got {len(found):,}")
    return tuple(sorted(found))


def _restriction(id2s: object) -> tuple[int, ...] | None:
    if id2s is None:
        return None
    if isinstance(id2s, (str, bytes)) or not isinstance(id2s, Iterable):
        raise InvalidRequest(f"id2s must be a list of ids, got {type(id2s).__name__}")
    wanted = tuple(sorted({check_id(i, "id2") for i in id2s}))
    if len(wanted) > MAX_ID2S:
        raise InvalidRequest(f"at most {MAX_ID2S:,} id2s in a query term, got {len(wanted):,}")
    return wanted
