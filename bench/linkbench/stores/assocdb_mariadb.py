"""assocdb on its MySQL/MariaDB backend: `AssocdbStore` over `assocdb.open(mysql://…)`.

The graph is named `linkbench_assocdb` on the server of `--mysql-url` (its
schemas `linkbench_assocdb_meta`, `_s0` … `_s15`), dropped before and after
the run, so every run starts empty; the journal is a local file in the run's
directory.
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
    """assocdb with 16 logical shards in InnoDB schemas on one MariaDB server."""

    name = "assocdb-mariadb"

    def __init__(
        self,
        directory: str | Path,
        link_types: Sequence[int],
        server_url: str,
        shards: int = 16,
        graph: str = GRAPH,
    ) -> None:
        self._url = graph_url(server_url, graph)
        MySQLBackend.drop(self._url)
        super().__init__(directory, link_types, shards, url=self._url)

    def close(self) -> None:
        super().close()
        MySQLBackend.drop(self._url)  # a run's graph is scratch, as its directory is

    def describe(self) -> str:
        return (
            f"{self.name}: assocdb on MariaDB, {self.shards} InnoDB schemas on one server,"
            " fsynced local journal, in-process cache"
        )
