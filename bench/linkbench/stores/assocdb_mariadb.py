"""assocdb on its MySQL/MariaDB backend: `AssocdbStore` over `assocdb.open(mysql://…)`.

The graph is named `linkbench_assocdb` on the server of `--mysql-url` (its
schemas `linkbench_assocdb_meta`, `_s0` … `_s15`), dropped before and after
the run, so every run starts empty; the journal is a local file in the run's
directory. With `engine="rocksdb"` (store `assocdb-myrocks`) the graph's tables
are MyRocks (`?engine=rocksdb`) and the graph is `linkbench_assocdb_rocks`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from assocdb.storage.mysql import MySQLBackend

from .assocdb_embedded import AssocdbStore

GRAPH = "linkbench_assocdb"


def graph_url(server_url: str, name: str = GRAPH) -> str:
    """The URL of graph `name` on the server `server_url` names (its path is replaced)."""
    parts = urlsplit(server_url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


class AssocdbMariaDBStore(AssocdbStore):
    """assocdb with 16 logical shards in InnoDB (or MyRocks) schemas on one MariaDB server."""

    def __init__(
        self,
        directory: str | Path,
        link_types: Sequence[int],
        server_url: str,
        shards: int = 16,
        graph: str = GRAPH,
        engine: str = "innodb",
    ) -> None:
        self.engine = engine
        self.name = "assocdb-myrocks" if engine == "rocksdb" else "assocdb-mariadb"
        if engine == "rocksdb":
            graph = f"{graph}_rocks"
        self._url = graph_url(server_url, graph)
        if engine != "innodb":
            self._url += ("&" if "?" in self._url else "?") + f"engine={engine}"
        MySQLBackend.drop(self._url)
        super().__init__(directory, link_types, shards, url=self._url)

    def close(self) -> None:
        super().close()
        MySQLBackend.drop(self._url)  # a run's graph is scratch, as its directory is

    def describe(self) -> str:
        kind = "MyRocks" if self.engine == "rocksdb" else "InnoDB"
        return (
            f"{self.name}: assocdb on MariaDB, {self.shards} {kind} schemas on one server,"
            " fsynced local journal, in-process cache"
        )

    def disk_bytes(self) -> int:
        """The graph's tables' data and index bytes as the engine reports them (MyRocks:
        after flushing its memtables, so what is in SST files)."""
        backend = MySQLBackend.open(self._url, create=False)
        try:
            with backend._session(slow=True) as session:
                if self.engine == "rocksdb":
                    backend._run(session, 0, "SET GLOBAL rocksdb_force_flush_memtable_now = 1")
                schemas = [s.strip("`") for s in (*backend._schemas, backend._meta)]
                for schema in schemas:
                    tables = backend._run(
                        session,
                        0,
                        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                        (schema,),
                    )
                    for (table,) in tables:
                        backend._run(session, 0, f"ANALYZE TABLE `{schema}`.`{table}`")
                marks = ", ".join(["%s"] * len(schemas))
                ((total,),) = backend._run(
                    session,
                    0,
                    "SELECT COALESCE(SUM(data_length + index_length), 0) "
                    f"FROM information_schema.tables WHERE table_schema IN ({marks})",
                    schemas,
                )
            return int(total)
        finally:
            backend.close()
