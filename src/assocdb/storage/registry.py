"""The one place that maps a path, URL or spec to a backend.

A directory is SQLite, a `mysql://` (or `mariadb://`) URL MySQL, a
`postgresql://` (or `postgres://`) URL PostgreSQL, a `.toml`
file a shard map of other backends; `spec()` dicts (what a backend says it
is) open the same backends again in another process.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..core.errors import InvalidRequest
from .backend import SERVER_SCHEMES, Backend, is_server_url
from .shardmap import ShardMapBackend
from .shardmap_config import load
from .sqlite import SQLiteBackend


def open_location(
    path: str | Path,
    shards: int | None,
    timeout: float,
    create: bool,
    journal: str | Path | None,
) -> tuple[Backend, str | Path]:
    """The backend at `path` and the journal file its graph uses (see `assocdb.open`)."""
    backend: Backend
    journal_file: str | Path
    check_scheme(path)
    check_timeout(timeout)
    if Path(path).suffix == ".toml":
        backend = open_shardmap(path, shards)
        journal_file = Path(path).with_suffix(".journal.db") if journal is None else journal
    elif is_server_url(path):
        path, journal = journal_from_url(str(path), journal)
        if journal is None:
            raise InvalidRequest(
                "a graph on a database server needs a journal file (a local file on durable "
                "storage): journal='data/social.journal', or ?journal=data/social.journal in "
                "the URL; writes are journaled there before they are applied on the server"
            )
        kind = SERVER_SCHEMES[str(path).split("://", 1)[0]]
        backend = open_backend({"kind": kind, "url": str(path), "shards": shards}, create)
        journal_file = journal
    else:
        backend = SQLiteBackend.open(path, shards, busy_timeout=timeout, create=create)
        journal_file = Path(path) / "journal.db" if journal is None else journal
    return backend, journal_file


def check_scheme(path: str | Path) -> None:
    """InvalidRequest for a URL whose scheme assocdb does not open (not a directory)."""
    if not isinstance(path, (str, Path)):
        raise InvalidRequest(
            "open takes a directory, a mysql:// or postgresql:// URL or a shard map (.toml), "
            f"got {path!r}"
        )
    if path == "" or "\0" in str(path):  # "" would be the current directory, silently
        raise InvalidRequest(f"open takes a directory's path, got {str(path)!r}")
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", str(path))
    if scheme and not is_server_url(str(path)):
        raise InvalidRequest(
            f"unknown URL scheme {scheme.group(1)!r}: assocdb opens a directory, a "
            "mysql:// (or mariadb://) URL, a postgresql:// (or postgres://) URL, or a shard "
            "map (.toml)"
        )


def check_timeout(timeout: object) -> None:
    """InvalidRequest for a timeout that is not a positive, finite number of seconds."""
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0 < timeout <= MAX_TIMEOUT
    ):
        raise InvalidRequest(
            f"timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT:,}, "
            f"got {timeout!r}"
        )


#: The longest wait for a locked shard that `open` takes (a day: more is a mistake).
MAX_TIMEOUT = 86_400


def journal_from_url(url: str, journal: str | Path | None) -> tuple[str, str | Path | None]:
    """The URL without its `journal` option, and the journal (the argument wins)."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL"
        raise InvalidRequest(f"bad URL {url!r}: {exc}") from None
    query = parse_qsl(parts.query, keep_blank_values=True)
    named = [value for key, value in query if key == "journal"]
    rest = urlencode([(key, value) for key, value in query if key != "journal"])
    return parts._replace(query=rest).geturl(), journal if journal is not None else (
        named[-1] if named else None
    )


def open_backend(spec: dict[str, Any], create: bool = True) -> Backend:
    """The backend a spec describes, e.g. `{"kind": "sqlite", "path": "data/", "shards": 16}`.

    `create=False` opens only what exists (see `assocdb.open`).
    """
    kind = spec.get("kind")
    if kind == "sqlite":
        return SQLiteBackend.open(spec["path"], spec.get("shards"), spec.get("timeout", 2.0))
    if kind == "mysql":
        from .mysql import MySQLBackend

        options: dict[str, Any] = {
            k: spec.get(k) for k in ("connect_timeout", "query_timeout", "pool_size")
        }
        return MySQLBackend.open(spec["url"], spec.get("shards"), create=create, **options)
    if kind == "postgres":
        from .postgres import PostgresBackend

        options = {
            k: spec.get(k) for k in ("connect_timeout", "query_timeout", "pool_size", "database")
        }
        return PostgresBackend.open(spec["url"], spec.get("shards"), create=create, **options)
    if kind == "shardmap":
        return ShardMapBackend.from_spec(spec, open_backend)
    raise InvalidRequest(f"unknown backend kind {kind!r}; known: sqlite, mysql, postgres, shardmap")


def open_shardmap(path: str | Path, shards: int | None = None) -> ShardMapBackend:
    """The replicated backend the shard map file `path` describes."""
    smap = load(path)
    if shards is not None and shards != smap.shards:
        raise InvalidRequest(
            f"{path} places {smap.shards} shards, not {shards}; the map fixes the shard "
            "count (omit shards= to open it)",
            shards=smap.shards,
        )
    return ShardMapBackend(smap, open_backend, source=path)
