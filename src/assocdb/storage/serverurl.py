"""What the URL of a graph on a database server says, for every server engine.

`SCHEME://user:password@host:port/NAME?shards=16&connect_timeout=1&query_timeout=2&pool_size=8`:
the path names the graph (its schemas are `NAME_s{k}` and `NAME_meta`), the
options are shared by the engines (an engine may accept more), and keyword
overrides that are not None win over the URL's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, NamedTuple
from urllib.parse import ParseResult, parse_qs, quote, unquote, urlparse

from ..core.errors import InvalidRequest
from .backend import SERVER_SCHEMES

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")
OPTIONS = frozenset({"shards", "connect_timeout", "query_timeout", "pool_size"})


class ServerURL(NamedTuple):
    parts: ParseResult
    name: str
    options: dict[str, Any]  # every option given, the engine's own included
    shards: int | None
    connect_timeout: float
    query_timeout: float
    pool_size: int


def parse_server_url(
    url: str, engine: str, example: str, more: frozenset[str], overrides: dict[str, Any]
) -> ServerURL:
    """The URL of a graph on `engine` (a `SERVER_SCHEMES` kind), checked; `more`: the
    options the engine takes besides the shared ones; `example`: a URL to show."""
    scheme = example.split("://", 1)[0]
    try:
        parts = urlparse(url)
        parts.port  # noqa: B018  # raises for a port that is not a number up to 65535
    except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535", …
        raise InvalidRequest(f"bad {scheme} URL {url!r}: {exc}") from None
    if SERVER_SCHEMES.get(parts.scheme) != engine:
        raise InvalidRequest(f"not a {scheme}:// URL: {url!r}")
    name = parts.path.strip("/")
    if not _NAME.fullmatch(name):
        raise InvalidRequest(
            f"the URL must name the graph with a letter and up to 39 letters, digits or "
            f"underscores, as in {example}; got {name!r}"
        )
    options: dict[str, Any] = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    options.update({k: v for k, v in overrides.items() if v is not None})
    unknown = options.keys() - OPTIONS - more
    if unknown:
        raise InvalidRequest(f"unknown {scheme} URL options: {sorted(unknown)}")
    try:
        shards = None if options.get("shards") is None else int(options["shards"])
        connect_timeout = float(options.get("connect_timeout", 1.0))
        query_timeout = float(options.get("query_timeout", 2.0))
        pool_size = int(options.get("pool_size", 8))
    except ValueError as exc:
        raise InvalidRequest(f"bad {scheme} URL option in {url!r}: {exc}") from None
    if not (0 < connect_timeout <= 3600 and 0 < query_timeout <= 3600 and 0 < pool_size <= 1000):
        raise InvalidRequest(
            "connect_timeout and query_timeout must be in (0, 3600] seconds and "
            f"pool_size in 1..1000; got {connect_timeout}, {query_timeout}, {pool_size}"
        )
    return ServerURL(parts, name, options, shards, connect_timeout, query_timeout, pool_size)


def server_spec(
    kind: str, scheme: str, settings: Any, shards: int, query: str = ""
) -> dict[str, Any]:
    """A server graph's `Backend.spec`: its URL (with the login, and `query`), its
    shards and the options every server engine shares (`settings`: its parsed URL)."""
    s = settings
    user = quote(s.user, safe="")
    login = f"{user}:{quote(s.password, safe='')}" if s.password else user
    return {
        "kind": kind,
        "url": f"{scheme}://{login}@{s.host}:{s.port}/{s.name}{query}",
        "shards": shards,
        "connect_timeout": s.connect_timeout,
        "query_timeout": s.query_timeout,
        "pool_size": s.pool_size,
    }


class Settings(NamedTuple):
    """Where a graph's server is and how long to wait for it, for every server engine."""

    scheme: str  # of `server_url`: mysql, postgresql
    host: str
    port: int
    user: str
    password: str
    name: str  # the graph's name: its schemas are NAME_meta, NAME_s0, NAME_s1, …
    shards: int | None
    connect_timeout: float = 1.0
    query_timeout: float = 2.0
    pool_size: int = 8
    database: str = ""  # PostgreSQL: the database that holds the graph's schemas
    engine: str = "InnoDB"  # MySQL: the tables' storage engine (`?engine=rocksdb`: MyRocks)

    def server_url(self) -> str:
        """The URL without the graph name and options (no password)."""
        return f"{self.scheme}://{self.user}@{self.host}:{self.port}/"


def settings_of(
    given: ServerURL, scheme: str, port: int, user: str, database: str = "", engine: str = ""
) -> Settings:
    """The settings a parsed URL says, with the engine's default `port` and `user`."""
    parts = given.parts
    return Settings(
        scheme=scheme,
        host=parts.hostname or "127.0.0.1",
        port=parts.port or port,
        user=unquote(parts.username or user),
        password=unquote(parts.password or ""),
        name=given.name,
        shards=given.shards,
        connect_timeout=given.connect_timeout,
        query_timeout=given.query_timeout,
        pool_size=given.pool_size,
        database=database,
        engine=engine or "InnoDB",
    )


def graph_schemas(names: Iterable[object], graph: str) -> list[str]:
    """Of the schemas on a server (`names`), those of graph `graph`: NAME_meta, NAME_s<k>."""
    found = []
    for name in names:
        prefix, _, suffix = str(name).rpartition("_")
        shard_schema = suffix[:1] == "s" and suffix[1:].isdigit()
        if prefix == graph and (suffix == "meta" or shard_schema):
            found.append(str(name))
    return found
