"""Opening graphs, and backends from their specs (the settings `Backend.spec()` returns)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._applier import RetryPolicy
from ._backend import Backend
from ._cache import CacheConfig
from ._errors import InvalidRequest
from ._graph import Graph
from ._journal import Journal
from ._sqlite import SQLiteBackend

DEFAULT_CACHE = CacheConfig()


def open_graph(
    path: str | Path,
    *,
    shards: int | None = None,
    schema: str | Path | None = None,
    sync: bool = True,
    journal: str | Path | None = None,
    timeout: float = 2.0,
    retry: RetryPolicy | None = None,
    cache: CacheConfig | None = DEFAULT_CACHE,
) -> Graph:
    """Open the graph stored in directory `path`, creating it if needed.

    * `shards` (default 16) is fixed when the graph is created; omit it to
      open an existing graph.
    * `schema` names a TOML file of type definitions to apply.
    * `sync=True` applies each write before returning (`applied`, or `queued`
      if a shard failed); `sync=False` returns once the write is journaled
      (`queued`) and applies it in the background.
    * `journal` is the write journal's file (default `path/journal.db`;
      ":memory:" keeps it in memory, for throwaway graphs only).
    * `timeout` is how long a statement may wait for a locked shard before
      the shard counts as unavailable.
    * `cache` sizes the in-process cache (None turns it off). Writes of this
      process are always read back; other processes' writes show within the
      cache's `max_age` (10 s by default).

    Unfinished writes left by a crash are applied before this returns.

    >>> g = assocdb.open("data/", shards=16, schema="schema.toml")
    """
    backend = SQLiteBackend.open(path, shards, busy_timeout=timeout)
    journal_file = Path(path) / "journal.db" if journal is None else journal
    graph = Graph(backend, Journal(journal_file), sync=sync, retry=retry, cache=cache)
    if schema is not None:
        graph.load_schema(schema)
    return graph


def open_backend(spec: dict[str, Any]) -> Backend:
    """The backend a spec describes, e.g. `{"kind": "sqlite", "path": "data/", "shards": 16}`."""
    kind = spec.get("kind")
    if kind == "sqlite":
        return SQLiteBackend.open(spec["path"], spec.get("shards"))
    raise InvalidRequest(f"unknown backend kind {kind!r}; known: sqlite")
