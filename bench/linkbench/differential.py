"""The differential mode: every generated operation on two stores, answers compared.

Both stores get the same load and then the same stream of operations, one
at a time. After each operation the answers are compared, and after each
write the touched state is read back from both (the count and the link of a
link write; the node of a node write), so a write that silently differs is
caught at once, not only when a later read happens to look.

What legitimately differs is normalised away:

* assocdb's own fields (`updated_at`, the object version) are not compared;
  LinkBench's version and time fields are, as stored data;
* a multiget is compared on its *visible* links: the reference's store
  returns hidden links too (flagged), assocdb's `assoc_get` cannot;
* write operations' return values are not compared (the reference only logs
  them, and assocdb's writes return a WriteResult), except `add_node`'s id;
  the read-backs check the effects instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import (
    ADD_LINK,
    ADD_NODE,
    COUNT_LINK,
    DELETE_LINK,
    DELETE_NODE,
    GET_LINKS_LIST,
    GET_NODE,
    MULTIGET_LINK,
    UPDATE_LINK,
    UPDATE_NODE,
)
from .execute import execute
from .requests import Op, RequestGenerator, Shared, requester_rng
from .sha1prng import thread_seeds
from .stores.base import LinkRow, Store

_LINK_WRITES = (ADD_LINK, UPDATE_LINK, DELETE_LINK)
_NODE_WRITES = (UPDATE_NODE, DELETE_NODE)


@dataclass
class DiffResult:
    operations: int = 0
    checks: int = 0
    disagreements: list[str] = field(default_factory=list)
    by_kind: dict[str, int] = field(default_factory=dict)


def _visible(rows: list[LinkRow]) -> list[tuple[int, int, bytes]]:
    return sorted((r.id2, r.time, r.data) for r in rows if r.visible)


def _listed(rows: list[LinkRow]) -> list[tuple[int, int, bytes]]:
    return [(r.id2, r.time, r.data) for r in rows]


def run_differential(
    a: Store, b: Store, shared: Shared, *, operations: int, seed: int = 1, keep: int = 20
) -> DiffResult:
    """Run `operations` generated operations on both stores; collect disagreements."""
    result = DiffResult()
    gen = RequestGenerator(shared, requester_rng(thread_seeds(seed, 1)[0]))

    def check(what: str, op: Op, x: Any, y: Any) -> None:
        result.checks += 1
        if x != y:
            result.by_kind[op.kind] = result.by_kind.get(op.kind, 0) + 1
            if len(result.disagreements) < keep:
                result.disagreements.append(
                    f"#{result.operations} {what} of {op!r}:\n  {a.name}: {x!r}\n  {b.name}: {y!r}"
                )

    for _ in range(operations):
        op = gen.next()
        x, y = execute(a, op), execute(b, op)
        kind = op.kind
        if kind == COUNT_LINK:
            check("count", op, x, y)
        elif kind == MULTIGET_LINK:
            check("multiget", op, _visible(a.normal_links(x)), _visible(b.normal_links(y)))
        elif kind == GET_LINKS_LIST:
            check("list", op, _listed(a.normal_links(x)), _listed(b.normal_links(y)))
            gen.observe_list(op, len(x), a.last_time(x) if x else None)
        elif kind == GET_NODE:
            check("node", op, a.normal_node(x), b.normal_node(y))
        elif kind == ADD_NODE:
            check("new node id", op, x, y)
            check("node after add", op, _node(a, op, x), _node(b, op, y))
        elif kind in _NODE_WRITES:
            check("node after write", op, _node(a, op, op.id1), _node(b, op, op.id1))
        if kind in _LINK_WRITES:
            check(
                "count after write",
                op,
                a.count_links(op.id1, op.link_type),
                b.count_links(op.id1, op.link_type),
            )
            check(
                "link after write",
                op,
                _visible(a.normal_links(a.get_links(op.id1, op.link_type, [op.id2]))),
                _visible(b.normal_links(b.get_links(op.id1, op.link_type, [op.id2]))),
            )
        result.operations += 1
    return result


def _node(store: Store, op: Op, node_id: int) -> Any:
    return store.normal_node(store.get_node(op.link_type, node_id))
