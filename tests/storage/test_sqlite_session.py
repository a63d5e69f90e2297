"""`SQLiteBackend`'s sessions: one reused cursor runs every statement (`_execute`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from assocdb import AssocdbError
from assocdb.core.merge import State
from assocdb.storage.sqlite import SQLiteBackend


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[SQLiteBackend]:
    b = SQLiteBackend.open(tmp_path / "g", 2)
    yield b
    b.close()


def _edge(id2: int, time: int) -> tuple[int, int, int, int, int, int, None]:
    return (1, 7, id2, State.NORMAL, time, time * 1000, None)


def test_a_session_runs_its_statements_on_one_cursor(backend: SQLiteBackend) -> None:
    shard = 0
    backend.apply(shard, [_edge(2, 10)], [])
    cursor = backend._conn(shard).cursor
    assert cursor is not None  # (`Connection.execute` made a cursor per statement)
    backend.apply(shard, [_edge(3, 11), _edge(4, 12)], [])  # a single row, then several
    assert backend.edges_at(shard, [(1, 7, 2), (1, 7, 3), (1, 7, 4)])
    assert backend._conn(shard).cursor is cursor
    assert backend.counts(shard, 1, 7) == {State.NORMAL: 3}


def test_one_row_and_many_rows_store_alike(backend: SQLiteBackend) -> None:
    # A lone row is executed, not executemany'd: its parameters are the row itself.
    backend.apply(0, [_edge(2, 10)], [])
    backend.apply(1, [_edge(2, 10), _edge(3, 11)], [])
    one = [tuple(row) for row in backend.edges_at(0, [(1, 7, 2)])]
    many = [tuple(row) for row in backend.edges_at(1, [(1, 7, 2)])]
    assert one == many == [_edge(2, 10)]
    assert backend.counts(0, 1, 7) == {State.NORMAL: 1}
    assert backend.counts(1, 1, 7) == {State.NORMAL: 2}


def test_a_failed_statement_leaves_the_cursor_usable(backend: SQLiteBackend) -> None:
    session = backend._conn(0)
    with pytest.raises(AssocdbError):
        backend._run(session, 0, "SELECT * FROM no_such_table")
    backend.apply(0, [_edge(2, 10)], [])  # the same cursor, after its error
    assert backend._run(session, 0, backend._q("SELECT COUNT(*) FROM {s}.edges", 0)) == [(1,)]


def test_each_thread_has_its_own_cursor(backend: SQLiteBackend) -> None:
    backend.apply(0, [_edge(2, 10)], [])
    mine = backend._conn(0).cursor
    theirs: list[object] = []

    def other() -> None:
        backend.apply(0, [_edge(3, 11)], [])
        theirs.append(backend._conn(0).cursor)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert len(theirs) == 1
    assert theirs[0] is not None
    assert theirs[0] is not mine
    assert backend.counts(0, 1, 7) == {State.NORMAL: 2}


def test_the_choke_point_keeps_its_faults_and_tracers(backend: SQLiteBackend) -> None:
    # SQLite's `_run` inlines the driver call: the faults still run before each
    # statement, the tracers see each one, a driver error is mapped.
    seen: list[tuple[int, str]] = []
    backend.tracers.append(lambda shard, sql, seconds: seen.append((shard, sql)))
    backend.apply(1, [_edge(2, 10)], [])
    assert next(sql.split(maxsplit=1)[0] for shard, sql in seen if shard == 1) == "BEGIN"
    assert seen[-1] == (1, "COMMIT")

    def refuse(shard: int, sql: str) -> None:
        if sql.startswith("BEGIN"):
            raise AssocdbError("refused by a fault")

    backend.faults.append(refuse)
    with pytest.raises(AssocdbError, match="refused by a fault"):
        backend.apply(1, [_edge(3, 11)], [])
    backend.faults.clear()
    session = backend._conn(0)
    with pytest.raises(AssocdbError) as raised:
        backend._run(session, 0, "SELECT * FROM no_such_table")
    assert "shard 0" in str(raised.value)
    assert session.broken
    assert backend.edges_at(1, [(1, 7, 3)]) == []
