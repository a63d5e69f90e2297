"""FlockDB's reads: select programs, their pages and counts, and select_edges.

A FlockDB select is a program in reverse Polish notation: `SimpleQuery`
pushes a term, `Intersection`, `Union` and `Difference` pop two queries and
push their combination. `compile` checks it as FlockDB's `SelectCompiler`
does and builds the same query with `Graph.select` and `&`, `|`, `-`.

Pages follow FlockDB's cursors (`paging.py`) three ways, as FlockDB does:

* a term without destination ids is paged by position (`time`): one read of
  `count + 1` rows from the cursor and one row on its other side, then
  FlockDB's window. Positions are not unique here as they were in FlockDB
  (a time is not a random 64-bit id), so a page whose end would cut a group
  of edges sharing one position takes the whole group: paging by position
  never skips or repeats an edge. A group larger than the list's limit
  cannot be paged by position and is refused.
* a term with destination ids is paged by id: every match, then the window;
* a compound query is paged by id with assocdb's own cursors, translated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..api.graph import Graph
from ..core import cursor as _cursor
from ..core.errors import InvalidRequest
from ..core.query import Query, Term
from ..core.records import Assoc, StateName
from .graphs import GraphTable
from .paging import END, START, Window, cursors, window

#: FlockDB's select operation types (SelectOperationType).
SIMPLE, INTERSECTION, UNION, DIFFERENCE = 1, 2, 3, 4
_OPERATOR_NAMES = {INTERSECTION: "an intersection", UNION: "a union", DIFFERENCE: "a difference"}
#: FlockDB's state ids (EdgeState), and their names here.
FLOCK_STATES: dict[int, StateName] = {0: "normal", 1: "removed", 2: "archived", 3: "negative"}
STATE_IDS = {name: number for number, name in FLOCK_STATES.items()}
MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1
_TIE_CHUNK = 500


class FlockTerm(NamedTuple):
    """A QueryTerm, decoded: `destination_ids` None means "all"."""

    source_id: int
    graph_id: int
    is_forward: bool
    destination_ids: list[int] | None
    state_ids: list[int] | None


class Results(NamedTuple):
    """One page: items (ids or edges) and FlockDB's cursors."""

    items: list[int]
    next_cursor: int
    prev_cursor: int


class EdgeResults(NamedTuple):
    edges: list[Assoc]
    next_cursor: int
    prev_cursor: int


class Selector:
    """select, select_edges and count over one Graph."""

    def __init__(self, graph: Graph, graphs: GraphTable) -> None:
        self._graph = graph
        self._graphs = graphs
        self._queries = graph.services.queries

    # -- programs ----------------------------------------------------------------------

    def term(self, term: FlockTerm) -> Term:
        """The assocdb term of a FlockDB query term."""
        kind = self._graphs.list_type(term.graph_id, term.is_forward)
        query = self._graph.select(
            term.source_id, kind.name, states=states_of(term.state_ids), id2s=term.destination_ids
        )
        assert isinstance(query, Term)
        return query

    def compile(self, program: Sequence[tuple[object, FlockTerm | None]]) -> Query:
        """The query of a program of `(operation type, term)`, checked like FlockDB's."""
        depth = 0
        for operation, _ in program:
            if operation == SIMPLE:
                depth += 1
            elif operation in _OPERATOR_NAMES:
                if depth < 2:
                    raise InvalidRequest(f"Need two sub-queries to do {_OPERATOR_NAMES[operation]}")
                depth -= 1
            else:
                raise InvalidRequest(f"Unknown operation {operation!r}")
        if depth != 1:
            raise InvalidRequest(f"Left {depth} items on the stack instead of 1")
        stack: list[Query] = []
        for operation, term in program:
            if operation == SIMPLE:
                if term is None:
                    raise InvalidRequest("a SimpleQuery operation needs a term")
                stack.append(self.term(term))
                continue
            right, left = stack.pop(), stack.pop()
            if operation == INTERSECTION:
                stack.append(left & right)
            elif operation == UNION:
                stack.append(left | right)
            else:
                stack.append(left - right)
        return stack[0]

    # -- pages -------------------------------------------------------------------------

    def page(self, query: Query, count: object, cursor: object) -> Results:
        """One page of a query, by FlockDB's cursor rules."""
        count, cursor = _checked(count, cursor)
        if count == 0:
            return Results([], END, END)
        if not isinstance(query, Term):
            return self._compound_page(query, count, cursor)
        if query.id2s is not None:
            return self._listed_page(query, count, cursor)
        rows, onward, back = self._position_page(query, count, cursor)
        first, last = (rows[0][0], rows[-1][0]) if rows else (None, None)
        return Results([id2 for _, id2 in rows], *cursors(first, last, onward, back))

    def edges_page(self, query: Term, count: object, cursor: object) -> EdgeResults:
        """select_edges: one page of a term as whole edges."""
        count, cursor = _checked(count, cursor)
        if count == 0:
            return EdgeResults([], END, END)
        if query.id2s is not None:
            ids = self._listed_page(query, count, cursor)
            return EdgeResults(self._edges(query, ids.items), ids.next_cursor, ids.prev_cursor)
        rows, onward, back = self._position_page(query, count, cursor)
        first, last = (rows[0][0], rows[-1][0]) if rows else (None, None)
        edges = self._edges(query, [id2 for _, id2 in rows])
        return EdgeResults(edges, *cursors(first, last, onward, back))

    def count(self, query: Query) -> int:
        """How many ids the query has (compounds: see `Query.count`), as an i32."""
        return min(query.count().value, MAX_INT32)

    def _edges(self, query: Term, id2s: list[int]) -> list[Assoc]:
        found = {edge.id2: edge for edge in self._queries.edges(query, id2s)} if id2s else {}
        return [found[i] for i in id2s if i in found]

    def _compound_page(self, query: Query, count: int, cursor: int) -> Results:
        """Ids descending: assocdb's keyset cursor on `(id,)`, from and to FlockDB's."""
        if cursor == END:
            return Results([], END, END)
        token = None
        if cursor != START:
            seek = _cursor.Seek(cursor > 0, (abs(cursor),), False)
            token = _cursor.encode(query.scope, seek)
        page = query.page(token, count)
        ids = page.items
        if not ids:
            return Results([], END, END)
        return Results(
            ids, ids[-1] if page.next_cursor else END, -ids[0] if page.prev_cursor else END
        )

    def _listed_page(self, query: Term, count: int, cursor: int) -> Results:
        """A term with destination ids: every match by id, then FlockDB's window."""
        assert query.id2s is not None
        count = min(count, self._limit(query))
        if not query.id2s:
            return Results([], END, END)
        found = self._queries.rows(query, _cursor.START, len(query.id2s) + 1)
        ids = sorted((id2 for _, id2 in found), reverse=True)
        w = window(ids, _identity, count, cursor)
        page = ids[w.start : w.stop]
        first, last = (page[0], page[-1]) if page else (None, None)
        return Results(page, *cursors(first, last, w.onward, w.back))

    def _position_page(
        self, query: Term, count: int, cursor: int
    ) -> tuple[list[tuple[int, int]], bool, bool]:
        """`(time, id2)` rows of a page by position, whether more lie onward and back."""
        count = min(count, self._limit(query))
        rows = self._queries.rows
        if cursor == START:
            data = rows(query, _cursor.START, count + 1)
        elif cursor >= END:  # positions below the cursor; one at or above it says "back"
            at_or_above = rows(query, _cursor.Seek(False, (cursor, 0), True), 1)
            data = at_or_above + rows(query, _cursor.Seek(True, (cursor, 0), False), count + 1)
        else:  # the positions just above -cursor; one at or below it says "onward"
            bound = (-cursor, MAX_INT64)
            above = rows(query, _cursor.Seek(False, bound, False), count + 1)
            data = above[::-1] + rows(query, _cursor.Seek(True, bound, True), 1)
        w = window(data, _position, count, cursor)
        page = list(data[w.start : w.stop])
        return self._whole_groups(query, data, page, w, cursor)

    def _whole_groups(
        self,
        query: Term,
        data: list[tuple[int, int]],
        page: list[tuple[int, int]],
        w: Window,
        cursor: int,
    ) -> tuple[list[tuple[int, int]], bool, bool]:
        """The page with the rest of the group of equal positions its far end cuts."""
        onward, back = w.onward, w.back
        if not page:
            return page, onward, back
        limit = self._limit(query)
        if cursor >= START and onward and data[w.stop][0] == page[-1][0]:
            group, onward = self._group(query, page[-1], True, limit - len(page))
            page += group
        elif cursor < START and back and data[w.start - 1][0] == page[0][0]:
            group, back = self._group(query, page[0], False, limit - len(page))
            page[:0] = group[::-1]
        return page, onward, back

    def _group(
        self, query: Term, edge: tuple[int, int], forward: bool, room: int
    ) -> tuple[list[tuple[int, int]], bool]:
        """The edges past `edge` (in `forward` order) with its position, and whether any
        edge lies beyond them; InvalidRequest if they do not fit in `room`."""
        position = edge[0]
        group: list[tuple[int, int]] = []
        seek = _cursor.Seek(forward, edge, False)
        while True:
            chunk = self._queries.rows(query, seek, _TIE_CHUNK)
            for row in chunk:
                if row[0] != position:
                    return group, True
                group.append(row)
            if len(group) > room:
                raise InvalidRequest(
                    f"more edges than a page may hold (the list's limit) share position "
                    f"{position}: FlockDB's cursors cannot page through them; give the edges "
                    f"distinct times, or page with assocdb's own cursors"
                )
            if len(chunk) < _TIE_CHUNK:
                return group, False
            seek = _cursor.Seek(forward, chunk[-1], False)

    def _limit(self, query: Term) -> int:
        return self._graph.engine.assoc_type(query.atype).limit


def states_of(state_ids: Sequence[object] | None) -> list[StateName]:
    """FlockDB state ids → state names; none given means normal edges only."""
    if not state_ids:
        return ["normal"]
    names = []
    for number in state_ids:
        if number not in FLOCK_STATES:
            raise InvalidRequest(
                f"unknown state id {number!r}: FlockDB's are 0 (Positive), 1 (Removed), "
                f"2 (Archived), 3 (Negative)"
            )
        names.append(FLOCK_STATES[number])
    return names


def _checked(count: object, cursor: object) -> tuple[int, int]:
    if type(count) is not int or count < 0:
        raise InvalidRequest(f"a page's count must be a non-negative integer, got {count!r}")
    if type(cursor) is not int or not -MAX_INT64 <= cursor <= MAX_INT64:
        raise InvalidRequest(
            f"bad cursor {cursor!r}: -1 starts, 0 is the end, a position pages on "
            f"(negative: back); -2^63 is none of these"
        )
    return count, cursor


def _identity(value: int) -> int:
    return value


def _position(row: tuple[int, int]) -> int:
    return row[0]
