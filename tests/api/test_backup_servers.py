"""Backups of graphs whose tables are made on first use (`storage/servercut.py`): an
index's table exists only on the shards its entries reached."""

from __future__ import annotations

from pathlib import Path

import assocdb
from tests.support.stores import Stores


def test_an_index_on_some_shards_only_is_backed_up(stores: Stores, tmp_path: Path) -> None:
    g = stores.open("source", shards=4)
    g.define_object("user")
    g.define_index("by_name", "user", ["name"])
    made = g.obj_add("user", {"name": "a"})  # its entry's table: on one shard only
    assocdb.backup(g, tmp_path / "backup")
    g.close()
    assert assocdb.verify_backup(tmp_path / "backup").ok
    assocdb.restore(tmp_path / "backup", tmp_path / "restored")
    with assocdb.open(tmp_path / "restored") as r:
        assert r.obj_get(made).data == {"name": "a"}
        assert [o.id for o in r.index_query("by_name", eq=["a"]).items] == [made]
