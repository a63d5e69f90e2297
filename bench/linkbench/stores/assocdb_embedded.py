"""assocdb embedded (`assocdb.open(dir)`), through its public API only.

How LinkBench maps onto assocdb:

* each link type is an association type `l<type>` with no inverse (LinkBench
  writes no inverse links) and a limit of 10,001: the paging-back query skips
  one row (`OFFSET 1`), so it asks for limit + 1 rows;
* add and update are `assoc_add` with the link's time and data (the payload
  bytes as a latin-1 str), delete is `assoc_delete` (a tombstone: hidden);
* a link list is `assoc_range` (newest first by (time, id2)), or
  `assoc_time_range` when paging back from a time;
* nodes are objects of type `node` with external ids (`obj_add(..., id=N)`)
  holding LinkBench's type, version, time and payload; new nodes take ids
  from a counter that starts after the loaded ones, as the bare schema's
  AUTO_INCREMENT does.

`assoc_get` returns visible edges only (assocdb has no API that returns
tombstones), so a multiget answer holds the visible subset of what the
reference returns; the differential mode compares visible links.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import assocdb

from ..config import RANGE_LIMIT
from ..load import LoadLink, LoadNode
from ..requests import MAX_TIME
from .base import LinkRow, NodeRow, link_bytes, link_data


def type_name(link_type: int) -> str:
    """The association type that holds LinkBench link type `link_type`."""
    return f"l{link_type}"


class AssocdbStore:
    """assocdb's `Graph`, in process; thread-safe, as Graph is."""

    name = "assocdb"

    def __init__(
        self,
        directory: str | Path,
        link_types: Sequence[int],
        shards: int = 16,
        url: str | None = None,
    ) -> None:
        # The cache keeps the newest RANGE_LIMIT + 1 edges of a list, so that
        # the workload's pages (up to 10,000 links) are answered from memory.
        cache = assocdb.CacheConfig(prefix=RANGE_LIMIT + 1)
        Path(directory).mkdir(parents=True, exist_ok=True)
        if url is None:  # embedded: shards and journal in the directory
            self.graph = assocdb.open(Path(directory) / "graph", shards=shards, cache=cache)
        else:  # shards on a MySQL/MariaDB server, journal in the directory
            journal = Path(directory) / "journal.db"
            self.graph = assocdb.open(url, shards=shards, journal=journal, cache=cache)
        self.shards = shards
        for link_type in link_types:
            self.graph.define_assoc(type_name(link_type), limit=RANGE_LIMIT + 1)
        self.graph.define_object("node")
        self._names = {t: type_name(t) for t in link_types}
        self._next_id = itertools.count(1)
        self._id_lock = threading.Lock()

    # -- load phase ----------------------------------------------------------------

    def load_links(self, links: Iterable[LoadLink]) -> int:
        names = self._names
        return self.graph.bulk_load(
            (link.id1, names[link.link_type], link.id2, link.time, link_data(link.data))
            for link in links
        )

    def load_nodes(self, nodes: Iterable[LoadNode]) -> int:
        # assocdb has no bulk path for objects: one obj_add (one transaction) each.
        count, top = 0, 0
        for node in nodes:
            self.graph.obj_add(
                "node", _node_data(node.type, node.version, node.time, node.data), id=node.id
            )
            count, top = count + 1, max(top, node.id)
        with self._id_lock:
            self._next_id = itertools.count(top + 1)
        return count

    # -- links -----------------------------------------------------------------------

    def add_link(self, id1: int, link_type: int, id2: int, time: int, data: bytes) -> None:
        self.graph.assoc_add(id1, self._names[link_type], id2, time=time, data=link_data(data))

    def delete_link(self, id1: int, link_type: int, id2: int) -> None:
        self.graph.assoc_delete(id1, self._names[link_type], id2)

    def count_links(self, id1: int, link_type: int) -> int:
        return self.graph.assoc_count(id1, self._names[link_type])

    def get_links(self, id1: int, link_type: int, id2s: Sequence[int]) -> list[Any]:
        return self.graph.assoc_get(id1, self._names[link_type], id2s)

    def get_link_list(
        self, id1: int, link_type: int, max_time: int, offset: int, limit: int
    ) -> list[Any]:
        name = self._names[link_type]
        if max_time == MAX_TIME and offset == 0:
            return self.graph.assoc_range(id1, name, 0, limit)
        rows = self.graph.assoc_time_range(id1, name, max_time, 0, limit + offset)
        return rows[offset:]

    def last_time(self, links: Sequence[Any]) -> int:
        return int(links[-1].time)

    # -- nodes -----------------------------------------------------------------------

    def add_node(self, node_type: int, version: int, time: int, data: bytes) -> int:
        with self._id_lock:
            node_id = next(self._next_id)
        self.graph.obj_add("node", _node_data(node_type, version, time, data), id=node_id)
        return node_id

    def get_node(self, node_type: int, node_id: int) -> Any:
        obj = self.graph.obj_get(node_id)
        return obj if obj is not None and obj.data["type"] == node_type else None

    def update_node(
        self, node_id: int, node_type: int, version: int, time: int, data: bytes
    ) -> bool:
        try:
            self.graph.obj_update(node_id, _node_data(node_type, version, time, data))
        except assocdb.NotFound:
            return False
        return True

    def delete_node(self, node_type: int, node_id: int) -> bool:
        try:
            self.graph.obj_delete(node_id)
        except assocdb.NotFound:
            return False
        return True

    # -- reporting -------------------------------------------------------------------

    def normal_links(self, links: Sequence[Any]) -> list[LinkRow]:
        return [LinkRow(a.id2, a.state == "normal", a.time, link_bytes(a.data)) for a in links]

    def normal_node(self, node: Any) -> NodeRow | None:
        if node is None:
            return None
        d = node.data
        return NodeRow(node.id, d["type"], d["version"], d["time"], link_bytes(d["data"]))

    def cache_hit_rate(self) -> float | None:
        stats = self.graph.cache_stats()
        return None if stats is None else stats.hit_rate

    def describe(self) -> str:
        return (
            f"{self.name}: assocdb embedded, {self.shards} SQLite shards "
            "(WAL, synchronous=NORMAL), fsynced journal, in-process cache"
        )

    def close(self) -> None:
        self.graph.close()


def _node_data(node_type: int, version: int, time: int, data: bytes) -> dict[str, Any]:
    return {"type": node_type, "version": version, "time": time, "data": link_data(data)}
