"""Opening a graph on SQL storage: a directory of SQLite files, or the schemas of a graph on
a database server (`open_graph`, `open_on_server`), with the shard count checked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from ..core.errors import InvalidRequest, no_graph
from .sql import DEFAULT_SHARDS, MAX_SHARDS, SQLBackend

B = TypeVar("B", bound=SQLBackend)


def check_shards(shards: object) -> None:
    """InvalidRequest unless `shards` is None or a shard count a graph may have."""
    if shards is not None and (type(shards) is not int or not 0 < shards <= MAX_SHARDS):
        raise InvalidRequest(f"shards must be an integer from 1 to {MAX_SHARDS}, got {shards!r}")


def open_graph(
    where: str,
    shards: int | None,
    stored: int | None,
    create: bool,
    make: Callable[[int, bool], B],
) -> B | None:
    """The backend of the graph at `where`, which holds `stored` shards (None: no graph).

    `make(count, new)` builds it (`new`: its tables are to be created first).
    A new graph gets `shards`; None means another process created the graph
    at the same time, and the caller opens that one.
    """
    if stored is not None:
        if shards is not None and shards != stored:
            raise InvalidRequest(
                f"{where} holds a graph with {stored} shards, not {shards}; the shard "
                f"count is fixed when a graph is created (omit shards= to open it)",
                shards=stored,
            )
        return make(stored, False)
    if not create:
        raise no_graph(where)
    backend = make(shards or DEFAULT_SHARDS, True)
    # The shard count is written last: a crash halfway leaves no graph, not half of one.
    if backend.swap_meta("shards", None, str(backend.shards).encode()):
        return backend
    backend.close()
    return None


class _ServerSettings(Protocol):
    @property
    def shards(self) -> int | None: ...

    @property
    def name(self) -> str: ...

    def server_url(self) -> str: ...


S = TypeVar("S", bound="_ServerSettings")
G = TypeVar("G", bound="ServerGraph")


class ServerGraph(Protocol):
    """What `open_on_server` needs of an engine's backend (MySQL's, PostgreSQL's)."""

    shards: int

    def _stored_shards(self) -> int | None: ...

    def _create(self) -> None: ...

    def swap_meta(self, key: str, expected: bytes | None, value: bytes) -> bool: ...

    def close(self) -> None: ...


def open_on_server(
    settings: S,
    backend: Callable[[S, int], G],
    create: bool,
    reopen: Callable[[], G],
) -> G:
    """The graph `settings` name on a database server, as `open_graph` opens one:
    `backend(settings, shards)` builds the engine's backend; `reopen()` opens the
    graph again when another process created it first."""
    check_shards(settings.shards)
    probe = backend(settings, 1)
    try:
        stored = probe._stored_shards()
    finally:
        probe.close()

    def make(count: int, new: bool) -> G:
        made = backend(settings._replace(shards=count), count)  # type: ignore[attr-defined]
        if new:
            made._create()
        return made

    where = f"{settings.server_url()}{settings.name}"
    opened = open_graph(where, settings.shards, stored, create, make)  # type: ignore[type-var]
    return reopen() if opened is None else opened
