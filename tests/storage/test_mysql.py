"""What is particular to the MySQL/MariaDB backend: URLs, locking, timeouts, drivers.

Every behaviour test of the Graph API also runs on MySQL through the
parametrised fixtures of `conftest.py`; these cover what SQLite has no
counterpart for.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from signal import SIGCONT, SIGKILL, SIGSTOP

import pytest

import assocdb
from assocdb import InvalidRequest, Unavailable
from assocdb.core.merge import EdgeTuple, State, merge_edges
from assocdb.storage.backend import is_server_url as is_mysql_url
from assocdb.storage.mysql import MySQLBackend
from assocdb.storage.mysqlpool import parse_url
from assocdb.storage.registry import open_backend
from assocdb.writes.applier import RetryPolicy
from tests.support.stores import MYSQL_URL, REQUIRED, Stores, mysql_url, require

# -- pure: URLs ---------------------------------------------------------------------


def test_urls_name_the_graph_and_carry_options() -> None:
    s = parse_url("mysql://app:p%40ss@db.local:3307/social?shards=64&query_timeout=0.5")
    assert (s.host, s.port, s.user, s.password, s.name) == (
        "db.local",
        3307,
        "app",
        "p@ss",
        "social",
    )
    assert (s.shards, s.query_timeout, s.connect_timeout, s.pool_size) == (64, 0.5, 1.0, 8)
    assert parse_url("mariadb://h/g", pool_size=3).pool_size == 3
    assert is_mysql_url("mysql://h/g")
    assert not is_mysql_url("data/mysql")
    assert not is_mysql_url(3)


def test_a_spec_keeps_a_password_with_url_characters() -> None:
    settings = parse_url("mysql://a%3Ab:p%40ss%2Fw%3Ard%25@127.0.0.1:1/g", shards=1)
    backend = MySQLBackend(settings, 1)  # opens no connection until used
    try:
        again = parse_url(backend.spec()["url"])
        assert (again.user, again.password, again.name) == ("a:b", "p@ss/w:rd%", "g")
    finally:
        backend.close()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://h/", "must name the graph"),
        ("mysql://h/1abc", "must name the graph"),
        ("mysql://h/a-b", "must name the graph"),
        ("mysql://h/g?colour=red", "unknown mysql URL options"),
        ("mysql://h/g?shards=many", "bad mysql URL option"),
        ("mysql://h/g?query_timeout=0", "query_timeout"),
        ("postgres://h/g", "not a mysql:// URL"),
    ],
)
def test_bad_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        parse_url(url)


def test_a_graph_on_mysql_needs_a_journal_file() -> None:
    with pytest.raises(InvalidRequest, match="needs a journal file"):
        assocdb.open("mysql://root@127.0.0.1:1/g")


# -- against the server ---------------------------------------------------------------


@pytest.fixture
def mysql(tmp_path: Path) -> Iterator[Stores]:
    stores = Stores("mysql", tmp_path)
    yield stores
    stores.close()


@pytest.fixture
def backend(mysql: Stores) -> Iterator[MySQLBackend]:
    url, _ = mysql.location("b")
    opened = MySQLBackend.open(str(url), 2)
    yield opened
    opened.close()


def test_concurrent_applies_on_the_same_keys_keep_rows_and_counts_exact(
    backend: MySQLBackend,
) -> None:
    """Threads apply random writes to the same few edges at once: the locking read
    serializes them, so the rows are the merge of all writes and the counts match."""
    rnd = random.Random(7)
    writes: list[EdgeTuple] = [
        (1, 5, rnd.randint(1, 6), rnd.choice(list(State)), rnd.randint(0, 3), ua, None)
        for ua in range(1, 401)
    ]
    batches = [writes[n : n + 4] for n in range(0, len(writes), 4)]
    rnd.shuffle(batches)
    errors: list[BaseException] = []

    def work(mine: list[list[EdgeTuple]]) -> None:
        try:
            for batch in mine:
                backend.apply(0, batch, ())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(batches[k::6],)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    expected, deltas = merge_edges({}, writes)
    assert sorted(backend.edges(0, 1, 5, range(1, 7))) == sorted(new for _, new in expected)
    counts = {state: n for state, n in backend.counts(0, 1, 5).items() if n}
    assert counts == {state: n for (_, _, state), n in deltas.items()}
    assert backend.recount(0, repair=False) == []


def test_a_statement_past_the_query_timeout_is_unavailable(mysql: Stores) -> None:
    url, _ = mysql.location("t", options="query_timeout=1")
    backend = MySQLBackend.open(str(url), 1)
    try:
        started = time.monotonic()
        with pytest.raises(Unavailable, match="shard 0"):
            backend._query(0, "SELECT SLEEP(10)")
        assert 0.9 < time.monotonic() - started < 1.8  # once, not retried
        assert backend.counts(0, 1, 1) == {}  # the pool replaced the broken connection
    finally:
        backend.close()


def test_a_locked_row_makes_the_write_queue_not_hang(mysql: Stores) -> None:
    """Another transaction holds the edge's row lock: the write gives up after the
    lock wait (about 1 s), is queued by the journal, and lands once the lock goes."""
    graph = mysql.open(at=mysql.location("g", options="query_timeout=2"), shards=1)
    graph.define_assoc("follows")
    graph.assoc_add(1, "follows", 2, time=1)
    other = MySQLBackend.open(graph.engine.backend.spec()["url"])  # type: ignore[attr-defined]
    try:
        with other._session() as session:
            other._run(session, 0, "START TRANSACTION")
            sql = other._q("SELECT * FROM {s}.edges WHERE id1 = 1 FOR UPDATE", 0)
            other._run(session, 0, sql)
            started = time.monotonic()
            result = graph.assoc_add(1, "follows", 2, time=9)
            assert result.status == "queued"
            assert time.monotonic() - started < 4
            other._run(session, 0, "ROLLBACK")
        assert graph.drain(timeout=30)
        assert [a.time for a in graph.assoc_range(1, "follows")] == [9]
        assert graph.check_counts() == []
    finally:
        other.close()


def test_a_server_that_does_not_answer_is_unavailable_quickly() -> None:
    started = time.monotonic()
    with pytest.raises(Unavailable, match=r"connecting to 127\.0\.0\.1:1"):
        MySQLBackend.open("mysql://root@127.0.0.1:1/g")
    assert time.monotonic() - started < 3


def test_spec_opens_the_same_graph_and_the_shard_count_is_fixed(
    backend: MySQLBackend,
) -> None:
    backend.apply(1, [(3, 1, 4, 0, 5, 6, b"x")], ())
    again = open_backend(backend.spec())
    try:
        assert again.shards == 2
        assert again.edges(1, 3, 1, [4]) == backend.edges(1, 3, 1, [4])
    finally:
        again.close()
    with pytest.raises(InvalidRequest, match="holds a graph with 2 shards"):
        MySQLBackend.open(backend.spec()["url"], 3)


def test_bulk_batches_run_with_the_maintenance_timeout(
    backend: MySQLBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big apply (a bulk-load round) has no journal behind it: it gets the long timeout."""
    slow = backend._slow_pool
    used: list[int] = []
    get = slow.get
    monkeypatch.setattr(slow, "get", lambda: used.append(1) or get())
    backend.apply(0, [(2, 1, 3, 0, 1, 1, None)], ())
    assert used == []  # a small write: the short-timeout pool
    backend.apply(0, [(1, 1, n, 0, n, 1, None) for n in range(1, 1002)], ())
    assert used == [1]
    assert backend.counts(0, 1, 1) == {0: 1001}


def test_every_statement_is_traced(backend: MySQLBackend) -> None:
    seen: list[tuple[int, str]] = []
    backend.tracers.append(lambda shard, sql, seconds: seen.append((shard, sql)))
    backend.apply(1, [(3, 1, 4, 0, 5, 6, None)], ())
    statements = [sql.split()[0] for shard, sql in seen if shard == 1]
    assert statements[0] == "START"
    assert statements[-1] == "COMMIT"
    assert any("FOR UPDATE" in sql for _, sql in seen)


def test_pymysql_is_used_when_mysqlclient_cannot_be_imported(
    mysql: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "MySQLdb", None)
    url, _ = mysql.location("p")
    backend = MySQLBackend.open(str(url), 1)
    try:
        assert backend._driver.__name__ == "pymysql"
        backend.apply(0, [(1, 1, 2, 0, 3, 4, b"d")], ())
        assert backend.edges(0, 1, 1, [2]) == [(1, 1, 2, 0, 3, 4, b"d")]
        assert backend.recount(0, repair=False) == []
    finally:
        backend.close()


def test_drop_removes_only_that_graphs_schemas(mysql: Stores) -> None:
    require("mysql")
    assert MYSQL_URL is not None
    keep, _ = mysql.location("keep")
    gone = mysql_url(f"{parse_url(str(keep)).name}x")  # a name that extends the other
    for url in (str(keep), gone):
        MySQLBackend.open(url, 2).close()
    MySQLBackend.drop(gone)
    kept = MySQLBackend.open(str(keep))
    try:
        assert kept.shards == 2
    finally:
        kept.close()
    again = MySQLBackend.open(gone, 3)  # created anew
    try:
        assert again.shards == 3
    finally:
        again.close()
        MySQLBackend.drop(gone)


def test_a_pooled_connection_the_server_closed_is_replaced_on_read(
    backend: MySQLBackend,
) -> None:
    """An idle pooled connection killed by the server (wait_timeout, a restart): the next
    read notices and runs again on a new connection instead of failing."""
    backend.apply(0, [(1, 1, 2, 0, 3, 4, None)], ())
    with backend._session() as session:
        (conn_id,) = backend._run(session, 0, "SELECT CONNECTION_ID()")[0]
    killer = MySQLBackend.open(backend.spec()["url"])
    try:
        with killer._session() as session:
            killer._run(session, 0, f"KILL {int(conn_id)}")
    finally:
        killer.close()
    assert backend.counts(0, 1, 1) == {0: 1}


SERVERS = [url for url in os.environ.get("ASSOCDB_TEST_MYSQL_URLS", "").split(",") if url]


@pytest.mark.skipif(
    len(SERVERS) < 2 and not REQUIRED, reason="ASSOCDB_TEST_MYSQL_URLS names fewer than 2 servers"
)
def test_graphs_of_the_same_name_on_two_servers_are_separate(tmp_path: Path) -> None:
    """The extra test servers (tests/support/mariadb_instances.sh) are independent stores."""
    assert len(SERVERS) >= 2, (
        "set ASSOCDB_TEST_MYSQL_URLS (tests/support/mariadb_instances.sh urls)"
    )
    name = f"t{uuid.uuid4().hex[:12]}_two"
    urls = [mysql_url(name, server) for server in SERVERS[:2]]
    backends = [MySQLBackend.open(url, 1) for url in urls]
    try:
        backends[0].apply(0, [(1, 1, 2, 0, 3, 4, None)], ())
        assert backends[0].counts(0, 1, 1) == {0: 1}
        assert backends[1].counts(0, 1, 1) == {}
    finally:
        for backend, url in zip(backends, urls, strict=True):
            backend.close()
            MySQLBackend.drop(url)


# -- a server of its own, to stop and kill -----------------------------------------------

PRIVATE_PORT = 3317  # not one of the shared extra servers (3307-3309)
INSTANCES = Path(__file__).parents[1] / "support" / "mariadb_instances.sh"


@pytest.fixture
def private_server() -> Iterator[tuple[str, Callable[[int], None], Callable[[], None]]]:
    """A MariaDB server only this test uses: (URL, send it a signal, restart it)."""
    require("mysql")
    if not shutil.which("mariadbd") and not Path("/usr/sbin/mariadbd").exists():
        pytest.skip("mariadbd is not installed")
    run = [str(INSTANCES), "start", str(PRIVATE_PORT)]
    subprocess.run(run, check=True, capture_output=True, timeout=120)
    pid_file = Path(f"/tmp/assocdb-mariadb/{PRIVATE_PORT}/mysqld.pid")

    def signal(number: int) -> None:
        os.kill(int(pid_file.read_text()), number)

    def restart() -> None:
        subprocess.run(run, check=True, capture_output=True, timeout=120)

    yield f"mysql://root@127.0.0.1:{PRIVATE_PORT}/", signal, restart
    signal(SIGCONT)
    stop = [str(INSTANCES), "stop", str(PRIVATE_PORT)]
    subprocess.run(stop, check=False, capture_output=True, timeout=60)


@pytest.mark.slow
def test_a_hung_then_killed_server_costs_timeouts_not_writes(
    private_server: tuple[str, Callable[[int], None], Callable[[], None]], tmp_path: Path
) -> None:
    server, signal, restart = private_server
    url = mysql_url(f"t{uuid.uuid4().hex[:12]}_hang", server, "query_timeout=1&connect_timeout=1")
    fast = RetryPolicy(base=0.01, cap=0.2, down_for=0.05, down_max=0.5)
    graph = assocdb.open(url, shards=2, journal=tmp_path / "journal.db", retry=fast, cache=None)
    try:
        graph.define_assoc("follows", inverse="followed_by")
        graph.assoc_add(1, "follows", 2, time=1)
        signal(SIGSTOP)  # a hang: connections stay open, nothing answers
        started = time.monotonic()
        assert graph.assoc_add(1, "follows", 3, time=2).status == "queued"
        with pytest.raises(Unavailable):
            graph.assoc_count(1, "follows")
        assert time.monotonic() - started < 6
        signal(SIGCONT)
        assert graph.drain(timeout=30)
        assert graph.assoc_count(1, "follows") == 2
        signal(SIGKILL)  # a crash: every pooled connection is dead
        assert graph.assoc_add(1, "follows", 4, time=3).status == "queued"
        restart()
        assert graph.drain(timeout=60)
        assert [a.id2 for a in graph.assoc_range(1, "follows")] == [4, 3, 2]
        assert graph.assoc_count(4, "followed_by") == 1
        assert graph.check_counts() == []
    finally:
        graph.close()
        MySQLBackend.drop(url)


def test_sessions_are_repeatable_read_whatever_the_server_default(
    private_server: tuple[str, Callable[[int], None], Callable[[], None]],
) -> None:
    # The locking reads of apply and merge_timelines gap-lock absent keys only
    # under REPEATABLE READ; under READ COMMITTED two first deliveries to one
    # home timeline would both read nothing and the later upsert would drop
    # the other's entry. So a server configured READ COMMITTED must not matter.
    server, _, _ = private_server
    admin = MySQLBackend.open(mysql_url("t_iso_admin", server), shards=1)
    try:
        admin._query(0, "SET GLOBAL tx_isolation = 'READ-COMMITTED'")
    finally:
        admin.close()
        MySQLBackend.drop(mysql_url("t_iso_admin", server))
    backend = MySQLBackend.open(mysql_url(f"t{uuid.uuid4().hex[:12]}_iso", server), shards=1)
    try:
        assert backend._query(0, "SELECT @@tx_isolation") == [("REPEATABLE-READ",)]
    finally:
        backend.close()


def test_a_graph_made_before_timelines_gets_its_timelines_table_when_first_written(
    mysql: Stores,
) -> None:
    graph = mysql.open("old", shards=2)
    backend = graph.engine.backend
    assert isinstance(backend, MySQLBackend)
    for shard in range(2):  # as a graph created before home timelines were stored
        backend._query(shard, backend._q("DROP TABLE {s}.timelines", shard))
    graph.define_assoc("follows", inverse="followed_by")
    graph.define_timeline("follows")
    for user in range(2, 8):
        graph.assoc_add(user, "follows", 1)
    assert graph.home_timeline(2).items == []  # a missing table reads as empty
    graph.post(1, 100, 10)
    assert graph.drain(10)
    for user in range(2, 8):
        assert [i.item for i in graph.home_timeline(user).items] == [100]
