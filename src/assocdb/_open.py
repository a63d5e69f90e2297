"""Opening graphs, and backends from their specs (the settings `Backend.spec()` returns)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._backend import Backend
from ._errors import InvalidRequest
from ._graph import Graph
from ._sqlite import SQLiteBackend


def open_graph(
    path: str | Path, *, shards: int | None = None, schema: str | Path | None = None
) -> Graph:
    """Open the graph stored in directory `path`, creating it if needed.

    `shards` (default 16) is fixed when the graph is created; omit it to open
    an existing graph. `schema` names a TOML file of type definitions to apply.

    >>> g = assocdb.open("data/", shards=16, schema="schema.toml")
    """
    graph = Graph(SQLiteBackend.open(path, shards))
    if schema is not None:
        graph.load_schema(schema)
    return graph


def open_backend(spec: dict[str, Any]) -> Backend:
    """The backend a spec describes, e.g. `{"kind": "sqlite", "path": "data/", "shards": 16}`."""
    kind = spec.get("kind")
    if kind == "sqlite":
        return SQLiteBackend.open(spec["path"], spec.get("shards"))
    raise InvalidRequest(f"unknown backend kind {kind!r}; known: sqlite")
