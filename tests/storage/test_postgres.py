"""The PostgreSQL engine: its URLs, its error mapping, and (against the server named by
ASSOCDB_TEST_POSTGRES_URL) what differs from the other engines: serialization
failures rerun, timeouts, stale pooled connections, the watchdog, COPY."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from assocdb import InvalidRequest, Unavailable
from assocdb.core.errors import AssocdbError
from assocdb.core.merge import EdgeTuple, State, merge_edges
from assocdb.storage.pgconn import map_pg_error, parse_url
from assocdb.storage.postgres import PostgresBackend
from assocdb.storage.registry import open_backend
from tests.support.http_server import free_port
from tests.support.stores import Stores, postgres_url

psycopg = pytest.importorskip("psycopg")
errors = psycopg.errors


def test_urls_name_the_graph_and_carry_options() -> None:
    s = parse_url("postgres://alice:p%40ss@db:5433/social?shards=8&database=app&query_timeout=3")
    assert (s.host, s.port, s.user, s.password, s.database) == ("db", 5433, "alice", "p@ss", "app")
    assert (s.name, s.shards, s.query_timeout, s.connect_timeout) == ("social", 8, 3.0, 1.0)
    default = parse_url("postgresql://h/g")
    assert (default.port, default.user, default.database) == (5432, "postgres", "postgres")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://h/", "must name the graph"),
        ("postgresql://h/a-b", "must name the graph"),
        ("postgresql://h/g?colour=red", "unknown postgresql URL options"),
        ("postgresql://h/g?shards=many", "bad postgresql URL option"),
        ("postgresql://h/g?connect_timeout=0", "connect_timeout"),
        ("mysql://h/g", "not a postgresql:// URL"),
    ],
)
def test_bad_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        parse_url(url)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (errors.SerializationFailure, Unavailable),
        (errors.DeadlockDetected, Unavailable),
        (errors.LockNotAvailable, Unavailable),
        (errors.QueryCanceled, Unavailable),
        (errors.AdminShutdown, Unavailable),
        (errors.DiskFull, Unavailable),
        (errors.NumericValueOutOfRange, InvalidRequest),
        (errors.UniqueViolation, AssocdbError),
        (errors.UndefinedTable, AssocdbError),
        (psycopg.OperationalError, Unavailable),  # no SQLSTATE: the connection is gone
    ],
)
def test_errors_are_mapped_by_sqlstate_class(error: type[Exception], kind: type) -> None:
    mapped = map_pg_error(error("boom"), "shard 3")
    assert type(mapped) is kind
    assert str(mapped).startswith("shard 3: ")


def test_a_server_that_does_not_answer_is_unavailable_quickly() -> None:
    started = time.monotonic()
    with pytest.raises(Unavailable, match=r"connecting to 127\.0\.0\.1:1"):
        PostgresBackend.open("postgresql://postgres@127.0.0.1:1/g")
    assert time.monotonic() - started < 3


def test_a_refused_connection_is_the_servers_own_error_at_once() -> None:
    """No server on the port: every read fails at once with libpq's own message, not
    after a wait on the pool (whose worker keeps a failed connect to itself), both
    before any connection and after a refusal. The pool's wait is 30 s here."""
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/g?query_timeout=30"
    backend = PostgresBackend(parse_url(url), 1)
    try:
        for _ in range(3):
            started = time.monotonic()
            with pytest.raises(Unavailable, match=r"connecting to .*Connection refused"):
                backend.counts(0, 1, 1)
            assert time.monotonic() - started < 1.0
    finally:
        backend.close()


# -- against the server ---------------------------------------------------------------


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[Stores]:
    stores = Stores("postgres", tmp_path)
    yield stores
    stores.close()


@pytest.fixture
def backend(pg: Stores) -> Iterator[PostgresBackend]:
    url, _ = pg.location("b")
    opened = PostgresBackend.open(str(url), 2)
    yield opened
    opened.close()


def test_concurrent_applies_on_the_same_keys_keep_rows_and_counts_exact(
    backend: PostgresBackend,
) -> None:
    """Threads apply random writes to the same few edges at once: a transaction that
    lost the race fails to serialize and runs again, so rows and counts are exact."""
    rnd = random.Random(7)
    writes: list[EdgeTuple] = [
        (1, 5, rnd.randint(1, 6), rnd.choice(list(State)), rnd.randint(0, 3), ua, None)
        for ua in range(1, 401)
    ]
    batches = [writes[n : n + 4] for n in range(0, len(writes), 4)]
    rnd.shuffle(batches)
    errors_seen: list[BaseException] = []
    reruns: list[str] = []
    backend.tracers.append(lambda shard, sql, s: sql.startswith("BEGIN") and reruns.append(sql))

    def work(mine: list[list[EdgeTuple]]) -> None:
        try:
            for batch in mine:
                backend.apply(0, batch, ())
        except BaseException as exc:
            errors_seen.append(exc)

    threads = [threading.Thread(target=work, args=(batches[k::4],)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors_seen == []
    expected, deltas = merge_edges({}, writes)
    assert sorted(backend.edges(0, 1, 5, range(1, 7))) == sorted(new for _, new in expected)
    counts = {state: n for state, n in backend.counts(0, 1, 5).items() if n}
    assert counts == {state: n for (_, _, state), n in deltas.items()}
    assert backend.recount(0, repair=False) == []


def test_a_statement_past_the_query_timeout_is_unavailable(pg: Stores) -> None:
    url, _ = pg.location("t", options="query_timeout=1")
    backend = PostgresBackend.open(str(url), 1)
    try:
        started = time.monotonic()
        with pytest.raises(Unavailable, match=r"57014"):  # statement_timeout
            backend._query(0, "SELECT pg_sleep(10)")
        assert 0.9 < time.monotonic() - started < 2.4  # once, not retried
        assert backend.counts(0, 1, 1) == {}
    finally:
        backend.close()


def test_the_watchdog_ends_a_statement_the_server_does_not(pg: Stores) -> None:
    """A server that stopped answering cancels nothing: the client gives up at its
    deadline (1.5 times the query timeout, plus 1 s), and the connection is thrown away."""
    url, _ = pg.location("w", options="query_timeout=1")
    backend = PostgresBackend.open(str(url), 1)
    try:
        with backend._session() as session:
            backend._run(session, 0, "SET statement_timeout = 0")  # as if the server hung
            started = time.monotonic()
            with pytest.raises(Unavailable):
                backend._run(session, 0, "SELECT pg_sleep(30)")
            assert 2.0 < time.monotonic() - started < 4.5
            assert session.conn.closed
        assert backend.counts(0, 1, 1) == {}  # a new connection
    finally:
        backend.close()


def test_a_locked_row_makes_the_write_queue_not_hang(pg: Stores) -> None:
    """Another transaction holds the edge's row lock: the write gives up after
    lock_timeout (about 1 s), is queued by the journal, and lands once the lock goes."""
    graph = pg.open(at=pg.location("g", options="query_timeout=2"), shards=1)
    graph.define_assoc("follows")
    graph.assoc_add(1, "follows", 2, time=1)
    other = PostgresBackend.open(graph.engine.backend.spec()["url"])  # type: ignore[attr-defined]
    try:
        with other._session() as session:
            other._run(session, 0, "BEGIN")
            other._run(session, 0, other._q("SELECT * FROM {s}.edges WHERE id1 = 1 FOR UPDATE", 0))
            started = time.monotonic()
            assert graph.assoc_add(1, "follows", 2, time=9).status == "queued"
            assert time.monotonic() - started < 4
            other._run(session, 0, "ROLLBACK")
        assert graph.drain(timeout=30)
        assert [a.time for a in graph.assoc_range(1, "follows")] == [9]
        assert graph.check_counts() == []
    finally:
        other.close()


def _terminate_others(backend: PostgresBackend) -> None:
    """The server ends every other assocdb connection (a restart, an idle timeout)."""
    with backend._session() as session:
        backend._run(
            session,
            0,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'assocdb' AND pid <> pg_backend_pid()",
        )


def test_a_pooled_connection_the_server_closed_is_replaced(backend: PostgresBackend) -> None:
    backend.apply(0, [(1, 1, 2, 0, 3, 4, None)], ())
    other = PostgresBackend.open(backend.spec()["url"])
    try:
        _terminate_others(other)
        assert backend.counts(0, 1, 1) == {0: 1}  # a read: replaced once, answered
        _terminate_others(other)
        backend.apply(0, [(1, 1, 3, 0, 3, 4, None)], ())  # a write: the same
        assert backend.counts(0, 1, 1) == {0: 2}
    finally:
        other.close()


def test_spec_opens_the_same_graph_and_the_shard_count_is_fixed(
    backend: PostgresBackend,
) -> None:
    backend.apply(1, [(3, 1, 4, 0, 5, 6, b"x")], ())
    again = open_backend(backend.spec())
    try:
        assert again.shards == 2
        assert again.edges(1, 3, 1, [4]) == backend.edges(1, 3, 1, [4])
    finally:
        again.close()
    with pytest.raises(InvalidRequest, match="holds a graph with 2 shards"):
        PostgresBackend.open(backend.spec()["url"], 3)


def test_every_write_is_one_traced_transaction(backend: PostgresBackend) -> None:
    seen: list[tuple[int, str]] = []
    backend.tracers.append(lambda shard, sql, seconds: seen.append((shard, sql)))
    backend.apply(1, [(3, 1, 4, 0, 5, 6, None)], ())
    statements = [sql for shard, sql in seen if shard == 1]
    assert statements[0] == "BEGIN ISOLATION LEVEL REPEATABLE READ"
    assert statements[-1] == "COMMIT"
    assert any(sql.endswith("FOR UPDATE") for sql in statements)
    assert any("ON CONFLICT" in sql for sql in statements)


def test_bulk_merge_copies_new_edges_and_upserts_changed_ones(backend: PostgresBackend) -> None:
    seen: list[str] = []
    backend.tracers.append(lambda shard, sql, seconds: seen.append(sql))
    first = [(1, 1, n, 0, n, 1, None) for n in range(1, 201)]
    assert backend.bulk_merge(0, first) == 200
    assert any(sql.startswith("COPY") for sql in seen)
    seen.clear()
    again = [(1, 1, n, 0, n, 2, b"d") for n in range(150, 251)]  # 51 changed, 50 new
    assert backend.bulk_merge(0, again) == 101
    assert any(sql.startswith("COPY") for sql in seen)
    assert backend.counts(0, 1, 1) == {0: 250}
    assert backend.edges(0, 1, 1, [150])[0][5:] == (2, b"d")
    assert backend.recount(0, repair=False) == []


def test_drop_removes_only_that_graphs_schemas(pg: Stores) -> None:
    url, _ = pg.location("keep")
    keep = PostgresBackend.open(str(url), 1)
    gone_url = postgres_url(f"{parse_url(str(url)).name}x")  # a name that extends the other
    PostgresBackend.open(gone_url, 2).close()
    PostgresBackend.drop(gone_url)
    try:
        with pytest.raises(AssocdbError, match="no graph"):
            PostgresBackend.open(gone_url, create=False)
        assert keep.counts(0, 1, 1) == {}
    finally:
        keep.close()


def test_two_processes_creating_one_graph_take_turns(pg: Stores) -> None:
    url, _ = pg.location("race")
    opened: list[PostgresBackend] = []
    failed: list[BaseException] = []

    def create() -> None:
        try:
            opened.append(PostgresBackend.open(str(url), 3))
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=create) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert failed == []
        assert {backend.shards for backend in opened} == {3}
    finally:
        for backend in opened:
            backend.close()
