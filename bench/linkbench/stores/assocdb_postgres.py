"""assocdb on its PostgreSQL backend: `AssocdbStore` over `assocdb.open(postgresql://…)`.

The graph is named `linkbench_assocdb` in the database of `--postgres-url`
(its schemas `linkbench_assocdb_meta`, `_s0` … `_s15`), dropped before and
after the run, so every run starts empty; the journal is a local file in the
run's directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from assocdb.storage.postgres import PostgresBackend

from .assocdb_embedded import AssocdbStore

GRAPH = "linkbench_assocdb"


def graph_url(server_url: str, name: str = GRAPH) -> str:
    """The URL of graph `name` in the database the server URL names (its path)."""
    parts = urlsplit(server_url)
    database = parts.path.strip("/") or "postgres"
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", f"database={database}", ""))


class AssocdbPostgresStore(AssocdbStore):
    """assocdb with 16 logical shards in schemas of one PostgreSQL database."""

    name = "assocdb-postgres"

    def __init__(
        self,
        directory: str | Path,
        link_types: Sequence[int],
        server_url: str,
        shards: int = 16,
        graph: str = GRAPH,
    ) -> None:
        self._url = graph_url(server_url, graph)
        PostgresBackend.drop(self._url)
        super().__init__(directory, link_types, shards, url=self._url)

    def close(self) -> None:
        super().close()
        PostgresBackend.drop(self._url)  # a run's graph is scratch, as its directory is

    def describe(self) -> str:
        return (
            f"{self.name}: assocdb on PostgreSQL, {self.shards} schemas in one database,"
            " fsynced local journal, in-process cache"
        )
