"""Journal benchmark (issue 3): durable writes with group commit, in one run.

* baseline: one SQLite transaction per write (WAL, synchronous=FULL, the
  journal's settings), one writer: every write pays its own fsync;
* the journal alone, `Journal.append` from 16 threads: group commit;
* `assoc_add` end to end (journal + forward and inverse legs), 1 and 16
  threads, sync mode; and 16 threads with sync=False.

Run: `python -m bench journal`.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import assocdb
from assocdb.writes.journal import Journal

THREADS = 16
SECONDS = 3.0


def rate(threads: int, work: Callable[[int, int], None]) -> float:
    """Calls per second of `work(thread, n)` from `threads` threads for SECONDS."""
    counts = [0] * threads
    stop = time.perf_counter() + SECONDS

    def loop(t: int) -> None:
        n = 0
        while time.perf_counter() < stop:
            work(t, n)
            n += 1
        counts[t] = n

    runners = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    start = time.perf_counter()
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()
    return sum(counts) / (time.perf_counter() - start)


def one_transaction_per_write(directory: Path) -> float:
    conn = sqlite3.connect(directory / "bare.db", isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, body BLOB)")

    def write(t: int, n: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO jobs (body) VALUES (?)", (b"x" * 60,))
        conn.execute("COMMIT")

    result = rate(1, write)
    conn.close()
    return result


def journal_group_commit(directory: Path) -> tuple[float, float]:
    journal = Journal(directory / "journal-only.db")
    result = rate(THREADS, lambda t, n: journal.append(b"x" * 60) and None)
    appended = journal.counts()["new"]
    per_commit = appended / max(1, journal.commits)
    journal.close()
    return result, per_commit


def assoc_add(directory: Path, threads: int, sync: bool) -> float:
    graph = assocdb.open(directory / f"graph-{threads}-{sync}", shards=16, sync=sync)
    graph.define_assoc("follows", inverse="followed_by")

    def write(t: int, n: int) -> None:
        graph.assoc_add(t * 10_000_000 + n + 1, "follows", n % 1000 + 1, time=n)

    result = rate(threads, write)
    graph.drain()
    graph.close()
    return result


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-journal-"))
    try:
        bare = one_transaction_per_write(directory)
        journal, per_commit = journal_group_commit(directory)
        single = assoc_add(directory, 1, True)
        many = assoc_add(directory, THREADS, True)
        background = assoc_add(directory, THREADS, False)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print("journal benchmark (durable: every acknowledged write is fsynced; same disk, this run)")
    print(f"{'':<58} {'writes/s':>10} {'vs baseline':>12}")
    rows = [
        ("baseline: one transaction (fsync) per write, 1 writer", bare),
        (f"Journal.append, {THREADS} threads (group commit, {per_commit:.0f} per fsync)", journal),
        ("assoc_add with inverse, sync, 1 thread", single),
        (f"assoc_add with inverse, sync, {THREADS} threads", many),
        (f"assoc_add with inverse, sync=False, {THREADS} threads", background),
    ]
    for label, value in rows:
        print(f"{label:<58} {value:>10,.0f} {value / bare:>11.1f}x")


if __name__ == "__main__":
    main()
