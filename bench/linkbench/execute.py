"""Running one generated `Op` against a store: the only place that maps ops to calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .config import (
    ADD_LINK,
    ADD_NODE,
    COUNT_LINK,
    DELETE_LINK,
    DELETE_NODE,
    GET_LINKS_LIST,
    GET_NODE,
    MULTIGET_LINK,
    RANGE_LIMIT,
    UPDATE_LINK,
    UPDATE_NODE,
)
from .requests import Op
from .stores.base import Store


def _link_write(s: Store, op: Op) -> Any:
    return s.add_link(op.id1, op.link_type, op.id2, op.time, op.data)


DISPATCH: dict[str, Callable[[Store, Op], Any]] = {
    ADD_LINK: _link_write,
    UPDATE_LINK: _link_write,  # the reference's updateLink is addLink with new data
    DELETE_LINK: lambda s, op: s.delete_link(op.id1, op.link_type, op.id2),
    COUNT_LINK: lambda s, op: s.count_links(op.id1, op.link_type),
    MULTIGET_LINK: lambda s, op: s.get_links(op.id1, op.link_type, op.id2s),
    GET_LINKS_LIST: lambda s, op: s.get_link_list(
        op.id1, op.link_type, op.max_time, op.offset, RANGE_LIMIT
    ),
    ADD_NODE: lambda s, op: s.add_node(op.link_type, op.version, op.time, op.data),
    UPDATE_NODE: lambda s, op: s.update_node(op.id1, op.link_type, op.version, op.time, op.data),
    DELETE_NODE: lambda s, op: s.delete_node(op.link_type, op.id1),
    GET_NODE: lambda s, op: s.get_node(op.link_type, op.id1),
}


def execute(store: Store, op: Op) -> Any:
    """Run `op` on `store` and return the store's answer."""
    return DISPATCH[op.kind](store, op)
