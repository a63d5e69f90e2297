"""Set-arithmetic terms resolved against the schema: which list a term reads, on which
shard, with which state numbers (`api.queries` plans and runs them)."""

from __future__ import annotations

from typing import Any, NamedTuple

from ..core.errors import InvalidRequest
from ..core.ids import shard_of
from ..core.query import Lists, Term
from ..core.records import STATE_NAMES
from ..core.schema import AssocType
from .engine import Engine

RESOLVED = 4096  # type resolutions a Queries keeps; more start the memo afresh


class Resolutions:
    """Terms resolved against the schema: the type of the list each reads, its
    shard and its state numbers. The type and states are kept by what the term
    says (node apart: traffic reads many nodes' lists of a few types), and the
    whole answer on the term (`Term.resolved`: a page asks it several times),
    while the schema stays the same object: a changed schema is a new one, and
    a new one starts the memo afresh."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._schema: object = None
        self._found: dict[tuple[Any, ...], Typed] = {}
        #: by what a term says, its `Where` on each shard (None: not asked yet)
        self._wheres: dict[tuple[Any, ...], list[Where | None]] = {}

    def where(self, q: Term) -> Where:
        engine = self._engine
        schema = engine.schema
        memo = q.resolved
        if memo is not None and memo[0] is schema:
            found: Where = memo[1]
            return found
        shards = engine.shards
        shard = shard_of(q.node, shards)
        if schema is not self._schema:
            self._found, self._wheres, self._schema = {}, {}, schema
        # One `Where` per shard and what the term says, kept: building it was ~0.4 µs
        # of a select (a page of two lists builds two).
        key = (q.atype, q.incoming, q.states)
        wheres = self._wheres.get(key)
        if wheres is None or len(wheres) != shards:  # (a graph grown: its shards anew)
            if len(self._wheres) >= RESOLVED:
                self._wheres = {}
            wheres = self._wheres[key] = [None] * shards
        where = wheres[shard]
        if where is None:
            where = wheres[shard] = Where(shard, *self.typed(q))
        q.resolved = (schema, where)
        return where

    def typed(self, q: Term | Lists) -> Typed:
        """The type id, state numbers and type of the lists a term reads."""
        schema = self._engine.schema
        if schema is not self._schema:
            self._found, self._schema = {}, schema  # (a racing run fills the old dict)
        key = (q.atype, q.incoming, q.states)
        typed = self._found.get(key)
        if typed is None:
            if len(self._found) >= RESOLVED:
                self._found = {}
            typed = self._found[key] = self._resolve(q)
        return typed

    def _resolve(self, q: Term | Lists) -> Typed:
        kind = self._engine.assoc_type(q.atype)
        if q.incoming:
            inverse = self._engine.schema.inverse(kind)
            if inverse is None:
                raise InvalidRequest(
                    f"{kind.name!r} has no inverse type, so incoming edges are not stored; "
                    f"define it with inverse= or symmetric=True"
                )
            kind = inverse
        return kind.id, tuple(STATE_NAMES.index(state) for state in q.states), kind


#: A term's list type id, state numbers and type (`Resolutions.typed`).
Typed = tuple[int, tuple[int, ...], AssocType]


class Where(NamedTuple):
    """Where a term's list is: its shard, type id and state numbers, and its type."""

    shard: int
    atype: int
    codes: tuple[int, ...]
    kind: AssocType
