"""The stores LinkBench runs against, by name, behind one interface (`base.Store`).

| name | what |
|---|---|
| `assocdb` | (a) assocdb embedded: `assocdb.open(dir)` |
| `assocdb-http` | (b) assocdb through `assocdb serve` (its own process) and `assocdb.Client` |
| `sqlite` | (c) the bare LinkBench schema on SQLite, same durability as assocdb |
| `mariadb` | (d) the bare LinkBench schema on MariaDB (needs a mysql:// URL) |
| `assocdb-mariadb` | (e) assocdb on its MariaDB backend (needs a mysql:// URL) |
| `postgres` | (f) the bare LinkBench schema on PostgreSQL (needs a postgresql:// URL) |
| `assocdb-postgres` | (g) assocdb on its PostgreSQL backend (needs a postgresql:// URL) |

Adding a store is one module with a class that has `base.Store`'s methods,
and one entry in `FACTORIES`: a function from the run's `StoreContext` to a
new, empty store. (b) is `AssocdbStore` over `assocdb.Client` (it has Graph's
methods); (e) is `AssocdbStore` over a Graph opened on a MariaDB server.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .base import LinkRow, NodeRow, Store


@dataclass(frozen=True)
class StoreContext:
    """What a factory may use: a fresh directory, the link types, server URLs."""

    directory: Path
    link_types: tuple[int, ...]
    mysql_url: str | None = None
    shards: int = 16
    postgres_url: str | None = None
    myrocks_url: str | None = None  # a MariaDB server that loaded MyRocks


class StoreUnavailable(Exception):
    """A store that cannot run here (not built yet, or its server is not configured)."""


def _assocdb(ctx: StoreContext) -> Store:
    from .assocdb_embedded import AssocdbStore

    return AssocdbStore(ctx.directory / "assocdb", ctx.link_types, ctx.shards)


def _assocdb_http(ctx: StoreContext) -> Store:
    from .assocdb_http import AssocdbHttpStore

    return AssocdbHttpStore(ctx.directory / "assocdb-http", ctx.link_types, ctx.shards)


def _sqlite(ctx: StoreContext) -> Store:
    from .bare_sqlite import BareSQLiteStore

    return BareSQLiteStore(ctx.directory / "bare-sqlite")


def _mariadb(ctx: StoreContext) -> Store:
    if not ctx.mysql_url:
        raise StoreUnavailable(
            "the mariadb store needs --mysql-url or ASSOCDB_TEST_MYSQL_URL "
            "(e.g. mysql://root@127.0.0.1:3306/)"
        )
    from .bare_mysql import BareMySQLStore

    return BareMySQLStore(ctx.mysql_url)


def _assocdb_mariadb(ctx: StoreContext) -> Store:
    if not ctx.mysql_url:
        raise StoreUnavailable(
            "the assocdb-mariadb store needs --mysql-url or ASSOCDB_TEST_MYSQL_URL "
            "(e.g. mysql://root@127.0.0.1:3306/)"
        )
    from .assocdb_mariadb import AssocdbMariaDBStore

    return AssocdbMariaDBStore(ctx.directory / "assocdb-mariadb", ctx.link_types, ctx.mysql_url)


def _assocdb_myrocks(ctx: StoreContext) -> Store:
    if not ctx.myrocks_url:
        raise StoreUnavailable(
            "the assocdb-myrocks store needs --myrocks-url or ASSOCDB_TEST_MYROCKS_URL, a "
            "MariaDB server that loaded MyRocks (tests/support/mariadb_instances.sh start 3310)"
        )
    from .assocdb_mariadb import AssocdbMariaDBStore

    return AssocdbMariaDBStore(
        ctx.directory / "assocdb-myrocks", ctx.link_types, ctx.myrocks_url, engine="rocksdb"
    )


def _postgres(ctx: StoreContext) -> Store:
    if not ctx.postgres_url:
        raise StoreUnavailable(
            "the postgres store needs --postgres-url or ASSOCDB_TEST_POSTGRES_URL "
            "(e.g. postgresql://postgres@127.0.0.1:5432/postgres)"
        )
    from .bare_postgres import BarePostgresStore

    return BarePostgresStore(ctx.postgres_url)


def _assocdb_postgres(ctx: StoreContext) -> Store:
    if not ctx.postgres_url:
        raise StoreUnavailable(
            "the assocdb-postgres store needs --postgres-url or ASSOCDB_TEST_POSTGRES_URL "
            "(e.g. postgresql://postgres@127.0.0.1:5432/postgres)"
        )
    from .assocdb_postgres import AssocdbPostgresStore

    return AssocdbPostgresStore(
        ctx.directory / "assocdb-postgres", ctx.link_types, ctx.postgres_url
    )


FACTORIES: dict[str, Callable[[StoreContext], Store]] = {
    "assocdb": _assocdb,
    "assocdb-http": _assocdb_http,
    "sqlite": _sqlite,
    "mariadb": _mariadb,
    "assocdb-mariadb": _assocdb_mariadb,
    "assocdb-myrocks": _assocdb_myrocks,
    "postgres": _postgres,
    "assocdb-postgres": _assocdb_postgres,
}


def open_store(name: str, ctx: StoreContext) -> Store:
    """A new, empty store of this kind; StoreUnavailable if it cannot run here."""
    try:
        factory = FACTORIES[name]
    except KeyError:
        known = ", ".join(FACTORIES)
        raise StoreUnavailable(f"unknown store {name!r}; choose from {known}") from None
    return factory(ctx)


__all__ = [
    "FACTORIES",
    "LinkRow",
    "NodeRow",
    "Store",
    "StoreContext",
    "StoreUnavailable",
    "open_store",
]
