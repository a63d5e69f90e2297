"""How a Graph is put together: an engine that waits for `start()`, services wired first.

`Graph.__init__` builds the `Engine`, one service per concern, registers the
index entries of object writes on the engine, and only then starts it. These
tests pin that order (a job left by a crash is replayed with every service in
place), that the services stand alone, and that the flat public API kept
every name it had.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import assocdb
from assocdb import Graph
from assocdb.api import (
    admin,
    assoc_reads,
    assoc_writes,
    checks,
    cleaner,
    indexes,
    nodes,
    objects,
    queries,
    queue_admin,
    timelines,
)
from assocdb.api.engine import Engine
from assocdb.client.wire import METHODS
from assocdb.core.errors import UnknownType
from assocdb.core.ids import shard_of
from assocdb.storage.sqlite import SQLiteBackend
from assocdb.writes.journal import Journal
from tests.support.stores import Stores

SERVICES = [
    admin.Admin,
    assoc_reads.AssocReads,
    assoc_writes.AssocWrites,
    checks.Checks,
    cleaner.Cleaner,
    indexes.Indexes,
    nodes.Nodes,
    objects.Objects,
    queries.Queries,
    queue_admin.QueueAdmin,
    timelines.Timelines,
]

#: Graph's public names before it was composed of services (mixins, until then).
PUBLIC = {
    *("obj_add", "obj_get", "obj_update", "obj_delete", "obj_restore"),
    *("assoc_add", "assoc_delete", "assoc_archive", "assoc_negate", "assoc_change_type"),
    *("batch", "bulk_load", "assoc_get", "assoc_count", "assoc_contains", "assoc_edge"),
    *("assoc_range", "assoc_time_range", "assoc_page", "assoc_pages", "assoc_iter"),
    *("node_archive", "node_unarchive", "node_negate", "node_remove", "node_state"),
    "select",
    *("define_timeline", "timeline_config", "post", "post_delete"),
    *("home_timeline", "user_timeline"),
    *("define_index", "drop_index", "indexes", "index_status", "index_query"),
    *("index_build", "index_repair_recent", "index_check", "start_cleaner"),
    *("queue_stats", "queue_jobs", "queue_job", "queue_retry", "queue_reinject", "drain"),
    *("check_counts", "check_inverses", "verify_replicas"),
    *("schema", "shards", "define_assoc", "define_object", "load_schema"),
    *("trace", "cache_stats", "hot_keys", "close"),
    *("enable_feed", "changes", "follow_changes", "feed_commit"),
}


def crashed_with_a_queued_object_write(where: Path) -> None:
    """A graph with an index whose object write is journaled, unapplied, when it dies."""
    g = assocdb.open(where, shards=4, sync=False)
    g.define_object("user")
    g.define_index("by_email", "user", ["email"])
    assert g.index_build("by_email").state == "ready"
    g.engine.applier.stop()  # no background work: the write stays journaled, not done
    g.obj_add("user", {"email": "ada@example.com"}, id=7)
    g.engine.journal.close()  # a crash: nothing else is shut down
    g.engine.backend.close()


def test_the_engine_replays_and_starts_threads_only_when_started(tmp_path: Path) -> None:
    crashed_with_a_queued_object_write(tmp_path / "g")
    before = set(threading.enumerate())
    engine = Engine(SQLiteBackend.open(tmp_path / "g"), Journal(tmp_path / "g" / "journal.db"))
    try:
        assert set(threading.enumerate()) - before == set()
        assert engine.journal.counts()["new"] == 1
        assert engine.backend.objects(shard_of(7, engine.shards), [7]) == []
        engine.start()
        engine.applier.fence()  # applied jobs leave the journal once their shards are synced
        engine.journal.flush()  # completions are recorded in batches
        assert engine.journal.counts()["new"] == 0
        assert engine.backend.objects(shard_of(7, engine.shards), [7]) != []
        started = {t.name for t in set(threading.enumerate()) - before}
        assert "assocdb-retrier" in started
    finally:
        engine.close()


def test_a_write_left_by_a_crash_is_replayed_once_every_service_is_wired(
    tmp_path: Path,
) -> None:
    crashed_with_a_queued_object_write(tmp_path / "g")
    with assocdb.open(tmp_path / "g") as g:  # the replay needs the indexes' entries
        assert g.queue_stats().depth == 0
        assert g.obj_get(7).data == {"email": "ada@example.com"}  # type: ignore[union-attr]
        assert [o.id for o in g.index_query("by_email", ["ada@example.com"]).items] == [7]
        assert g.index_check("by_email").missing == 0


def test_index_entries_are_wired_before_the_engine_starts(tmp_path: Path) -> None:
    with assocdb.open(tmp_path / "g") as g:
        index = indexes.Indexes(g.engine)
        with pytest.raises(RuntimeError, match="before start"):
            g.engine.set_index_entries(index.entries)


def test_graph_keeps_its_public_methods() -> None:
    public = {name for name in dir(Graph) if not name.startswith("_")}
    assert public == PUBLIC
    served = {m for m in METHODS if not m.startswith("deletions_")}  # g.deletions.NAME
    assert served - {"query_page", "query_count"} <= public  # queries run via select
    for name in public - {"schema", "shards"}:
        assert inspect.getdoc(getattr(Graph, name)), f"help(Graph.{name}) says nothing"


def test_services_stand_alone() -> None:
    for service in SERVICES:
        assert service.__mro__ == (service, object), service  # no concern inherits another
        state = [
            name
            for name, value in vars(service).items()
            if not name.startswith("__") and not inspect.isfunction(value)
        ]
        assert state == [], f"{service.__name__} keeps state in class attributes: {state}"
    assert Engine.__mro__ == (Engine, object)
    assert Graph.__mro__ == (Graph, object)  # composed, not mixed in


def test_a_name_defined_through_another_graph_is_never_refused(stores: Stores) -> None:
    """Two processes (here two Graphs) on one graph: a name one of them defined is
    resolved by the other even right after it last re-read the schema, for every
    kind of name (a process re-reads before refusing one, every time)."""
    where, journal = stores.location("g")
    one = stores.open(at=(where, journal), shards=2)
    two = stores.open(at=(where, journal.with_name("other-" + journal.name)))
    with pytest.raises(UnknownType):  # the other process re-reads the schema now
        two.assoc_add(1, "follows", 2)
    one.define_assoc("follows", inverse="followed_by")
    assert two.assoc_add(1, "follows", 2).status == "applied"
    one.define_object("user")
    uid = two.obj_add("user", {"k": 1})
    one.define_index("by_k", "user", ["k"])
    assert [o.id for o in two.index_query("by_k", eq=[1]).items] in ([uid], [])
    assert two.timeline_config() is None  # and keeps that answer a while
    one.define_timeline("follows", mode="write")
    assert two.post(1, 77).status == "applied"
    assert [i.item for i in one.user_timeline(1).items] == [77]


def test_a_type_defined_by_another_process_is_never_refused(tmp_path: Path) -> None:
    """The same across processes: the child refuses an unknown type (and re-reads the
    schema doing so), the parent defines it, and the child's next write of it applies."""
    where = tmp_path / "g"
    assocdb.open(where, shards=2).close()
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(where)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "refused"
        with assocdb.open(where) as g:
            g.define_assoc("follows", inverse="followed_by")
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "applied"
    finally:
        child.stdin.close()
        assert child.wait(timeout=60) == 0
        child.stdout.close()


_CHILD = """
import sys
import assocdb
with assocdb.open(sys.argv[1]) as g:
    try:
        g.assoc_add(1, "follows", 2)
    except assocdb.UnknownType:
        print("refused", flush=True)
    sys.stdin.readline()
    print(g.assoc_add(1, "follows", 2).status, flush=True)
"""
