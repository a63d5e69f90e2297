"""Opening graphs, and backends from their specs (the settings `Backend.spec()` returns)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from ._applier import RetryPolicy
from ._backend import Backend
from ._cache import CacheConfig
from ._errors import InvalidRequest
from ._graph import Graph
from ._journal import Journal
from ._mysqlpool import is_mysql_url
from ._shardmap import ShardMapBackend
from ._shardmap_config import load
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
    create: bool = True,
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

    A `mysql://user:password@host:port/NAME` URL (options: `?shards=16&
    connect_timeout=1&query_timeout=2&pool_size=8`) keeps the graph NAME in
    InnoDB schemas NAME_meta, NAME_s0, … of that MySQL or MariaDB server; the
    journal must then be named (`journal=`, or `?journal=PATH` in the URL, as
    the CLI takes it): a local file on durable storage.

    Unfinished writes left by a crash are applied before this returns.

    A `path` ending in `.toml` is a shard map instead (`_shardmap_config`):
    the graph's shards live on the replica sets of the backends it names,
    with the timeouts it sets (`timeout` does not apply), and the journal
    defaults to the map's name with `.journal.db` (`cluster.toml` →
    `cluster.journal.db`): keep one journal per process that writes.

    >>> g = assocdb.open("data/", shards=16, schema="schema.toml")
    >>> g = assocdb.open("mysql://root@127.0.0.1:3306/social", journal="social.journal")
    >>> g = assocdb.open("cluster.toml", journal="/var/lib/assocdb/journal.db")
    """
    backend: Backend
    journal_file: str | Path
    _check_scheme(path)
    if Path(path).suffix == ".toml":
        backend = open_shardmap(path, shards)
        journal_file = Path(path).with_suffix(".journal.db") if journal is None else journal
    elif is_mysql_url(path):
        path, journal = _journal_from_url(str(path), journal)
        if journal is None:
            raise InvalidRequest(
                "a graph on MySQL needs a journal file (a local file on durable storage): "
                "journal='data/social.journal', or ?journal=data/social.journal in the URL; "
                "writes are journaled there before they are applied on the server"
            )
        from ._mysql import MySQLBackend

        backend = MySQLBackend.open(str(path), shards, create=create)
        journal_file = journal
    else:
        backend = SQLiteBackend.open(path, shards, busy_timeout=timeout, create=create)
        journal_file = Path(path) / "journal.db" if journal is None else journal
    graph = Graph(backend, Journal(journal_file), sync=sync, retry=retry, cache=cache)
    if schema is not None:
        graph.load_schema(schema)
    return graph


def _check_scheme(path: str | Path) -> None:
    """InvalidRequest for a URL whose scheme assocdb does not open (not a directory)."""
    if not isinstance(path, (str, Path)):
        raise InvalidRequest(
            f"open takes a directory, a mysql:// URL or a shard map (.toml), got {path!r}"
        )
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", str(path))
    if scheme and not is_mysql_url(str(path)):
        raise InvalidRequest(
            f"unknown URL scheme {scheme.group(1)!r}: assocdb opens a directory, a "
            "mysql:// (or mariadb://) URL, or a shard map (.toml)"
        )


def _journal_from_url(url: str, journal: str | Path | None) -> tuple[str, str | Path | None]:
    """The URL without its `journal` option, and the journal (the argument wins)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    named = [value for key, value in query if key == "journal"]
    rest = urlencode([(key, value) for key, value in query if key != "journal"])
    return parts._replace(query=rest).geturl(), journal if journal is not None else (
        named[-1] if named else None
    )


def open_backend(spec: dict[str, Any]) -> Backend:
    """The backend a spec describes, e.g. `{"kind": "sqlite", "path": "data/", "shards": 16}`."""
    kind = spec.get("kind")
    if kind == "sqlite":
        return SQLiteBackend.open(spec["path"], spec.get("shards"), spec.get("timeout", 2.0))
    if kind == "mysql":
        from ._mysql import MySQLBackend

        options: dict[str, Any] = {
            k: spec.get(k) for k in ("connect_timeout", "query_timeout", "pool_size")
        }
        return MySQLBackend.open(spec["url"], spec.get("shards"), **options)
    if kind == "shardmap":
        return ShardMapBackend.from_spec(spec, open_backend)
    raise InvalidRequest(f"unknown backend kind {kind!r}; known: sqlite, mysql, shardmap")


def open_shardmap(path: str | Path, shards: int | None = None) -> ShardMapBackend:
    """The replicated backend the shard map file `path` describes."""
    smap = load(path)
    if shards is not None and shards != smap.shards:
        raise InvalidRequest(f"{path} places {smap.shards} shards, not {shards}")
    return ShardMapBackend(smap, open_backend, source=path)
