"""The one small interface every LinkBench store implements, and the answers' shapes.

A store is LinkBench's `LinkStore` + `NodeStore` with the semantics the
reference's MySQL store has (and assocdb must match):

* a link list holds the *visible* links, newest first (by time, then id2),
  at most `limit`; `max_time`/`offset` page back as the reference does;
* a count is the number of visible links, changed in the same transaction
  as the link;
* deleting a link hides it; adding a hidden link again shows it and counts
  it again; adding a visible link again replaces its time and data;
* id2 need not be a node (dangling links are fine);
* nodes get ids from the store (`add_node`); `update_node` and
  `delete_node` say whether the node was there.

Each method is called by many threads at once; a store keeps one connection
per thread. Answers come back in whatever form is cheapest for the store;
`normal_*` turn them into plain tuples for the differential mode, so the
benchmark never pays for conversions the store would not need.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol

from ..load import LoadLink, LoadNode


class LinkRow(NamedTuple):
    """A link as the differential mode compares it."""

    id2: int
    visible: bool
    time: int
    data: bytes


class NodeRow(NamedTuple):
    """A node as the differential mode compares it."""

    id: int
    type: int
    version: int
    time: int
    data: bytes


class Store(Protocol):
    """A graph store under test."""

    name: str

    # -- load phase ------------------------------------------------------------
    def load_links(self, links: Iterable[LoadLink]) -> int:
        """Bulk-load visible links and their counts; returns how many."""

    def load_nodes(self, nodes: Iterable[LoadNode]) -> int:
        """Bulk-load nodes with the ids they carry; returns how many."""

    # -- links -----------------------------------------------------------------
    def add_link(self, id1: int, link_type: int, id2: int, time: int, data: bytes) -> None:
        """Add or update (and show) a link, counting it if it was not visible."""

    def delete_link(self, id1: int, link_type: int, id2: int) -> None:
        """Hide a link, uncounting it if it was visible."""

    def count_links(self, id1: int, link_type: int) -> int:
        """The number of visible links."""

    def get_links(self, id1: int, link_type: int, id2s: Sequence[int]) -> Sequence[Any]:
        """The links to these id2s (a store may include hidden ones, as the reference does)."""

    def get_link_list(
        self, id1: int, link_type: int, max_time: int, offset: int, limit: int
    ) -> Sequence[Any]:
        """Visible links with time <= max_time, newest first, skipping `offset`."""

    def last_time(self, links: Sequence[Any]) -> int:
        """The time of the last (oldest) link of a `get_link_list` answer."""

    # -- nodes -----------------------------------------------------------------
    def add_node(self, node_type: int, version: int, time: int, data: bytes) -> int:
        """Store a new node and return the id the store gave it."""

    def get_node(self, node_type: int, node_id: int) -> Any:
        """The node, or None if there is none of this type."""

    def update_node(
        self, node_id: int, node_type: int, version: int, time: int, data: bytes
    ) -> bool:
        """Replace a node's version, time and data; False if there is no such node."""

    def delete_node(self, node_type: int, node_id: int) -> bool:
        """Delete a node; False if there was none."""

    # -- reporting and the differential mode -----------------------------------
    def normal_links(self, links: Sequence[Any]) -> list[LinkRow]:
        """An answer of get_links or get_link_list as LinkRows, in answer order."""

    def normal_node(self, node: Any) -> NodeRow | None:
        """An answer of get_node as a NodeRow."""

    def cache_hit_rate(self) -> float | None:
        """The share of reads the store's cache answered, or None without a cache."""

    def describe(self) -> str:
        """One line: what this store is and its durability settings."""

    def close(self) -> None:
        """Release every connection."""


def link_data(data: bytes) -> str:
    """Payload bytes as a str of the same code points (latin-1), for JSON stores."""
    return data.decode("latin-1")


def link_bytes(data: str | bytes | None) -> bytes:
    """The inverse of `link_data` (bytes pass through)."""
    if data is None:
        return b""
    return data if isinstance(data, bytes) else data.encode("latin-1")
