"""The hold of a server graph's cut (`storage/servercut.py`): while it lasts, no leg of
any kind commits, so no job completes between the shards' snapshot and the journal's."""

from __future__ import annotations

import pytest

from assocdb.core.errors import Unavailable
from assocdb.core.timeline_list import entry
from assocdb.storage import servercut
from assocdb.storage.registry import open_backend
from assocdb.storage.sql import SQLBackend
from tests.support.stores import TEST_TIMEOUTS, Stores


@pytest.mark.parametrize("backend_kind", ["mysql", "postgres"])
def test_a_home_timeline_write_waits_for_the_hold(stores: Stores) -> None:
    g = stores.open("g", shards=2)
    backend = g.engine.backend
    assert isinstance(backend, SQLBackend)
    backend.merge_timelines(1, {7: [entry(1, 1, 2, 1)]}, 100)  # the table is there
    spec = backend.spec()
    spec["url"] = spec["url"].replace(TEST_TIMEOUTS, "query_timeout=1&connect_timeout=5")
    other = open_backend(spec, create=False)  # another app server, quick to give up
    assert isinstance(other, SQLBackend)
    try:
        with servercut._session(backend) as hold:
            servercut._hold(backend, hold)
            try:
                # A leg of a fan-out job: it writes home timelines alone.
                with pytest.raises(Unavailable):
                    other.merge_timelines(1, {7: [entry(2, 2, 2, 2)]}, 100)
            finally:
                servercut._release(backend, hold)
        assert other.merge_timelines(1, {7: [entry(3, 3, 2, 3)]}, 100) == 1
    finally:
        other.close()
