"""What a graph holds, per type, from the kept counts: the console's overview numbers.

Edges come from the counts table (one row per list: `SUM(n)` grouped by type
and state), never from a scan of the edges; objects from the `(otype, …)`
index's `COUNT(*)`. Both cost a pass over an index per shard, so callers keep
the answer a while rather than asking on every page view.
"""

from __future__ import annotations

from collections import defaultdict

import msgspec

from ..core.records import STATE_NAMES
from .engine import Engine


class TypeTotals(msgspec.Struct, frozen=True):
    """Objects per object type and edges per association type and state (tombstones
    of objects included, as the index counts them)."""

    objects: dict[str, int]
    edges: dict[str, dict[str, int]]


def type_totals(engine: Engine) -> TypeTotals:
    """The totals of every shard of the engine's backend, by type name."""
    backend, schema = engine.backend, engine.schema
    objects = {
        otype.name: sum(backend.objects_count(s, otype.id) for s in range(engine.shards))
        for otype in schema.object_types
    }
    names = {atype.id: atype.name for atype in schema.assoc_types}
    edges: dict[str, dict[str, int]] = defaultdict(dict)
    for shard in range(engine.shards):
        for (atype, state), n in backend.count_totals(shard).items():
            name = names.get(atype, f"type {atype}")
            by_state = edges[name]
            by_state[STATE_NAMES[state]] = by_state.get(STATE_NAMES[state], 0) + n
    return TypeTotals(objects, {name: edges[name] for name in sorted(edges)})
