"""The hold of a server graph's cut (`storage/servercut.py`): while it lasts, no leg of
any kind commits, so no job completes between the shards' snapshot and the journal's."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from assocdb.core.errors import Unavailable
from assocdb.core.timeline_list import entry
from assocdb.storage import servercut
from assocdb.storage.registry import open_backend
from assocdb.storage.sql import SQLBackend
from tests.support.stores import TEST_TIMEOUTS, Stores

Write = Callable[[SQLBackend], object]


@pytest.mark.parametrize("backend_kind", ["mysql", "postgres"])
@pytest.mark.parametrize("leg", ["timelines", "index entries"])
def test_a_leg_that_writes_no_edge_waits_for_the_hold(stores: Stores, leg: str) -> None:
    g = stores.open("g", shards=2)
    backend = g.engine.backend
    assert isinstance(backend, SQLBackend)
    write: Write
    if leg == "timelines":  # a fan-out job's leg
        backend.merge_timelines(1, {7: [entry(1, 1, 2, 1)]}, 100)  # the table is there

        def write(b: SQLBackend) -> object:
            return b.merge_timelines(1, {7: [entry(2, 2, 2, 2)]}, 100)

    else:  # an index's entries, written apart from their objects
        g.define_object("user")
        g.define_index("by_name", "user", ["name"])
        index = g.schema.index("by_name").id
        made = g.obj_add("user", {"name": "a"})
        shard, entries = next(
            (s, found) for s in range(2) if (found := backend.index_entries(s, index, [made]))
        )

        def write(b: SQLBackend) -> object:  # newer each time: a change to store
            nonlocal entries
            entries = [(i, k, o, at + 1, v, st) for i, k, o, at, v, st in entries]
            return b.index_apply(shard, entries)

    spec = backend.spec()
    spec["url"] = spec["url"].replace(TEST_TIMEOUTS, "query_timeout=1&connect_timeout=5")
    other = open_backend(spec, create=False)  # another app server, quick to give up
    assert isinstance(other, SQLBackend)
    try:
        with servercut._session(backend) as hold:
            servercut._hold(backend, hold, servercut._optional(backend, hold))
            try:
                with pytest.raises(Unavailable):
                    write(other)
            finally:
                servercut._release(backend, hold)
        write(other)
    finally:
        other.close()
