"""Opening a graph: a backend and a journal from a place, composed into a `Graph`."""

from __future__ import annotations

from pathlib import Path

from ..cache.entries import Tier2
from ..core.errors import InvalidRequest
from ..core.records import CacheConfig
from ..core.schema import Schema, read_schema_file
from ..storage.registry import open_location
from ..writes.applier import RetryPolicy
from ..writes.journal import Journal
from .graph import Graph

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
    create: bool = True,
    tier2: Tier2 | None = None,
) -> Graph:
    """Open the graph stored in directory `path` (or at a MySQL URL), creating it if needed.

    * `create=False` opens only: a place that holds no graph raises
      `NotFound` ("no graph at …") and nothing is created there.

    * `shards` (default 16) is fixed when the graph is created; omit it to
      open an existing graph.
    * `schema` names a TOML file of type definitions to apply.
    * `sync=True` applies each write before returning (`applied`, or `queued`
      if a shard failed); `sync=False` returns once the write is journaled
      (`queued`) and applies it in the background.
    * `journal` is the write journal's file (default `path/journal.db`;
      ":memory:" keeps it in memory, for throwaway graphs only).
    * `timeout` is how long a statement may wait for a locked shard before
      the shard counts as unavailable (SQLite; on MySQL the URL's
      `query_timeout` and `connect_timeout` say it).
    * `cache` sizes the in-process cache (None turns it off). Writes of this
      process are always read back; other processes' writes show within the
      cache's `max_age` (10 s by default).
    * `tier2` is the cache's tier shared with other processes, in place of the
      Redis tier `cache.redis` names (`assocdb serve` passes its workers' ring of
      invalidations).

    A `mysql://user:password@host:port/NAME` URL (options: `?shards=16&
    connect_timeout=1&query_timeout=2&pool_size=8`) keeps the graph NAME in
    InnoDB schemas NAME_meta, NAME_s0, … of that MySQL or MariaDB server; the
    journal must then be named (`journal=`, or `?journal=PATH` in the URL, as
    the CLI takes it): a local file on durable storage.

    Unfinished writes left by a crash are applied before this returns.

    A `path` ending in `.toml` is a shard map instead (`storage.shardmap_config`):
    the graph's shards live on the replica sets of the backends it names,
    with the timeouts it sets (`timeout` does not apply), and the journal
    defaults to the map's name with `.journal.db` (`cluster.toml` →
    `cluster.journal.db`): keep one journal per process that writes.

    >>> g = assocdb.open("data/", shards=16, schema="schema.toml")
    >>> g = assocdb.open("mysql://root@127.0.0.1:3306/social", journal="social.journal")
    >>> g = assocdb.open("cluster.toml", journal="/var/lib/assocdb/journal.db")
    """
    if cache is not None and not isinstance(cache, CacheConfig):
        raise InvalidRequest(f"cache must be a CacheConfig or None, got {cache!r}")
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise InvalidRequest(f"retry must be a RetryPolicy or None, got {retry!r}")
    if schema is not None:  # a missing or bad file fails before anything is created
        Schema().apply_toml(read_schema_file(schema))
    backend, journal_file = open_location(path, shards, timeout, create, journal)
    graph = Graph(backend, Journal(journal_file), sync=sync, retry=retry, cache=cache, tier2=tier2)
    if schema is not None:
        graph.load_schema(schema)
    return graph
