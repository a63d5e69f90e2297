"""The journal file: durability, group commit, job states, operator actions."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from assocdb import InvalidRequest, Unavailable
from assocdb.writes.journal import Failure, Journal, _Waiter


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    j = Journal(tmp_path / "journal.db")
    yield j
    j.close()


def test_appended_jobs_survive_reopening(tmp_path: Path) -> None:
    first = Journal(tmp_path / "j.db")
    ids = [first.append(b"job %d" % n) for n in range(3)]
    first.close()
    again = Journal(tmp_path / "j.db")
    assert [(j.id, j.body, j.state) for j in again.unfinished()] == [
        (ids[0], b"job 0", "new"),
        (ids[1], b"job 1", "new"),
        (ids[2], b"job 2", "new"),
    ]
    again.close()


def test_ids_are_never_reused(journal: Journal) -> None:
    first = journal.append(b"a")
    journal.complete([first])
    journal.flush()
    assert journal.append(b"b") > first


@pytest.mark.parametrize("pending", [False, True])
def test_jobs_appended_together_get_their_ids_in_order(journal: Journal, pending: bool) -> None:
    """Jobs committed together are inserted by one statement (up to 200, its own
    transaction when nothing rides along; more, or with completions to record, in a
    transaction): each job's id is its own, in order, and never reused."""
    if pending:  # (a completion to record: the transaction's path)
        journal.complete([journal.append(b"done")])
    for n in (1, 3, 200, 450):
        bodies = [b"%d-%d" % (n, i) for i in range(n)]
        ids = journal.append_many(bodies)
        assert ids == sorted(set(ids))
        assert [journal.get(job).body for job in ids] == bodies  # type: ignore[union-attr]
        journal.complete(ids[-1:])
        journal.flush()  # the newest id gone: still not reused
        assert journal.append(b"next") == ids[-1] + 1
    assert journal.counts()["new"] == 1 + 3 + 200 + 450 - 4 + 4


def test_concurrent_appends_share_commits(journal: Journal) -> None:
    barrier = threading.Barrier(16)
    ids: list[int] = []

    def writer() -> None:
        barrier.wait()
        for n in range(50):
            ids.append(journal.append(b"x%d" % n))

    threads = [threading.Thread(target=writer) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 800
    assert journal.counts()["new"] == 800
    assert journal.commits < 800 / 2, journal.commits  # group commit: far fewer fsyncs than jobs


def test_completions_ride_along_with_the_next_commit(journal: Journal) -> None:
    done = journal.append(b"a")
    journal.complete([done])
    commits = journal.commits
    journal.append(b"b")
    assert journal.commits == commits + 1
    assert [j.body for j in journal.unfinished()] == [b"b"]


def test_failed_jobs_wait_in_the_error_queue_until_due(journal: Journal) -> None:
    job = journal.append(b"a")
    journal.fail(
        [Failure(job, done=0b01, error="Unavailable: down", counts=False, next_at=100.0, bad=False)]
    )
    assert journal.unfinished() == []
    assert journal.claim_due(now=99.0, limit=10, hold=60) == []
    (claimed,) = journal.claim_due(now=100.0, limit=10, hold=60)
    assert (claimed.id, claimed.done, claimed.attempts, claimed.retries) == (job, 1, 0, 1)
    assert journal.claim_due(now=101.0, limit=10, hold=60) == []  # held by this claimer
    assert journal.next_due() == 160.0


def test_counting_failures_and_bad_jobs(journal: Journal) -> None:
    job = journal.append(b"a")
    journal.fail([Failure(job, 0, "AssocdbError: boom", counts=True, next_at=0, bad=False)])
    journal.fail([Failure(job, 0, "AssocdbError: boom", counts=True, next_at=0, bad=True)])
    info = journal.get(job)
    assert info is not None
    assert (info.state, info.attempts, info.retries, info.error) == (
        "bad",
        2,
        2,
        "AssocdbError: boom",
    )
    assert journal.counts() == {"new": 0, "error": 0, "bad": 1, "running": 0}
    assert journal.reinject([job]) == 1
    info = journal.get(job)
    assert info is not None
    assert (info.state, info.attempts) == ("error", 0)


def test_retry_now_makes_every_error_due(journal: Journal) -> None:
    jobs = [journal.append(b"x") for _ in range(3)]
    for job in jobs:
        journal.fail([Failure(job, 0, "Unavailable", counts=False, next_at=1e12, bad=False)])
    assert journal.retry_now() == 3
    assert len(journal.claim_due(now=1.0, limit=10, hold=1)) == 3


def test_listing_by_state(journal: Journal) -> None:
    jobs = [journal.append(b"x") for _ in range(5)]
    journal.fail([Failure(jobs[1], 0, "e", counts=True, next_at=0, bad=True)])
    journal.fail([Failure(jobs[3], 0, "e", counts=True, next_at=0, bad=True)])
    assert [j.id for j in journal.jobs("bad")] == [jobs[1], jobs[3]]
    assert [j.id for j in journal.jobs("bad", after=jobs[1])] == [jobs[3]]
    assert [j.id for j in journal.jobs("new", limit=2)] == jobs[0:1] + jobs[2:3]
    with pytest.raises(InvalidRequest, match="job state"):
        journal.jobs("lost")  # type: ignore[arg-type]


def test_an_unwritable_journal_refuses_to_acknowledge(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.db")
    journal._conn.execute("PRAGMA query_only = 1")  # every write now fails, like a full disk
    with pytest.raises(Unavailable, match=r"readonly|query_only|attempt to write"):
        journal.append(b"a")
    journal._conn.execute("PRAGMA query_only = 0")
    assert journal.append(b"b") > 0
    journal.close()


# -- a journal that cannot write (a full disk) -----------------------------------


class FailingConnection:
    """The journal's connection with a fault at its choke point: statements whose SQL
    starts with one of `failing` raise SQLITE_FULL, as on a full disk. A write outside
    a transaction (a lone job's INSERT) commits itself: it fails as a COMMIT does."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.failing: tuple[str, ...] = ()
        self.before_commit: Callable[[], None] = lambda: None

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT" or (
            not self.conn.in_transaction and sql.startswith(("INSERT", "UPDATE", "DELETE"))
        ):
            self.before_commit()
            self._check("COMMIT")
        self._check(sql)
        return self.conn.execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
        self._check(sql)
        return self.conn.executemany(sql, *args)

    def _check(self, sql: str) -> None:
        if sql.lstrip().startswith(self.failing):
            raise sqlite3.OperationalError("database or disk is full")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


@pytest.fixture
def faulty(journal: Journal) -> FailingConnection:
    conn = FailingConnection(journal._conn)
    journal._conn = conn  # type: ignore[assignment]
    return conn


def test_a_job_whose_commit_fails_is_refused_and_never_shown_an_id(
    journal: Journal, faulty: FailingConnection
) -> None:
    # A waiter returns as soon as it sees its id: an id shown before the COMMIT
    # fails acknowledges a job the file never held (and the next insert reuses it).
    batch = [_Waiter(b"a"), _Waiter(b"b")]
    seen: list[int | None] = []
    faulty.before_commit = lambda: seen.extend(w.id for w in batch)
    faulty.failing = ("COMMIT",)
    journal._commit(batch)
    assert seen == [None, None]
    assert all(w.id is None and isinstance(w.error, Unavailable) for w in batch)
    with pytest.raises(Unavailable):
        journal.append(b"refused")
    faulty.failing = ()
    job = journal.append(b"c")  # not stuck in the failed transaction
    assert [j.body for j in journal.unfinished()] == [b"c"]
    assert journal.get(job) is not None


def test_bookkeeping_that_fails_to_commit_rides_along_with_the_next(
    journal: Journal, faulty: FailingConnection
) -> None:
    applied, failed = journal.append(b"applied"), journal.append(b"failed")
    journal.complete([applied])
    faulty.failing = ("COMMIT",)
    with pytest.raises(Unavailable):
        journal.fail([Failure(failed, 1, "shard 0: disk full", False, 0.0, False)])
    faulty.failing = ()
    journal.flush()
    reopened = Journal(journal.path)  # what the file holds
    assert reopened.get(applied) is None
    stored = reopened.get(failed)
    assert stored is not None
    assert (stored.state, stored.done) == ("error", 1)
    reopened.close()


@pytest.mark.parametrize(
    "call",
    [
        lambda j: j.append(b"x"),
        lambda j: j.resolved(1, b"x"),
        lambda j: j.progress(1, b"x"),
        lambda j: j.claim_due(1e18, 10, 1.0),
        lambda j: j.next_due(),
        lambda j: j.jobs("error"),
        lambda j: j.unfinished(),
        lambda j: j.counts(),
        lambda j: j.reinject(),
        lambda j: j.retry_now(),
        lambda j: (j.complete([1]), j.flush()),
    ],
)
def test_every_driver_error_is_mapped(
    journal: Journal, faulty: FailingConnection, call: Callable[[Journal], object]
) -> None:
    journal.append(b"job")
    faulty.failing = ("BEGIN", "SELECT", "INSERT", "UPDATE", "DELETE", "COMMIT")
    with pytest.raises(Unavailable, match="disk is full"):
        call(journal)


def test_unwritable_says_why_appends_fail_until_a_write_succeeds(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.db")
    assert journal.unwritable() is None
    journal._conn.execute("PRAGMA query_only = 1")  # like a full disk
    assert journal.unwritable() is None  # nothing failed yet: no probe
    with pytest.raises(Unavailable):
        journal.append(b"a")
    assert "journal" in (journal.unwritable() or "")  # the probe fails too
    journal._conn.execute("PRAGMA query_only = 0")
    assert journal.unwritable() is None  # the probe succeeds: ready again
    assert journal.failing is None
    assert journal.unfinished() == []  # the probe left nothing behind
    journal.close()
