"""A PostgreSQL server stopped and killed under load: writes come back `queued`,
nothing acknowledged is lost, and the counts are exact after recovery.

The server is a private instance (`tests/support/postgres_instance.py`): its
own data directory and port, so stopping it disturbs no other test.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from signal import SIGCONT, SIGKILL, SIGSTOP

import pytest

import assocdb
from assocdb import Unavailable
from assocdb.storage.postgres import PostgresBackend
from assocdb.writes.applier import RetryPolicy
from tests.support.helpers import wait_until
from tests.support.postgres_instance import PrivatePostgres, binaries
from tests.support.stores import require

PRIVATE_PORT = 5442
WRITERS = 4


@pytest.fixture
def server() -> Iterator[PrivatePostgres]:
    require("postgres")
    if binaries() is None:
        pytest.skip("PostgreSQL's server programs are not installed")
    instance = PrivatePostgres(PRIVATE_PORT)
    instance.start()
    yield instance
    instance.stop()


class Load:
    """Writers adding edges until stopped; each remembers what was acknowledged."""

    def __init__(self, graph: assocdb.Graph) -> None:
        self.graph = graph
        self.acked: list[set[int]] = [set() for _ in range(WRITERS)]
        self.statuses: list[str] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._write, args=(w,)) for w in range(WRITERS)]
        for thread in self._threads:
            thread.start()

    def _write(self, writer: int) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            try:
                status = self.graph.assoc_add(writer + 1, "follows", 1000 + n, time=n).status
            except Unavailable:  # refused (not acknowledged): allowed, not counted
                continue
            except BaseException as exc:
                self.errors.append(exc)
                return
            self.statuses.append(status)
            self.acked[writer].add(1000 + n)

    def written(self) -> int:
        return sum(len(a) for a in self.acked)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


@pytest.mark.slow
def test_a_stopped_then_killed_server_under_load_loses_nothing(
    server: PrivatePostgres, tmp_path: Path
) -> None:
    name = f"t{uuid.uuid4().hex[:12]}_outage"
    url = f"postgresql://postgres@127.0.0.1:{PRIVATE_PORT}/{name}?query_timeout=1&connect_timeout=1"
    fast = RetryPolicy(base=0.01, cap=0.2, down_for=0.05, down_max=0.5)
    graph = assocdb.open(url, shards=4, journal=tmp_path / "journal.db", retry=fast, cache=None)
    try:
        graph.define_assoc("follows", inverse="followed_by")
        load = Load(graph)
        wait_until(lambda: load.written() >= 20)
        server.signal(SIGSTOP)  # a hang: connections stay open, nothing answers
        stopped = len(load.statuses)
        wait_until(lambda: "queued" in load.statuses[stopped:])
        started = time.monotonic()
        with pytest.raises(Unavailable):
            graph.assoc_count(1, "follows")
        assert time.monotonic() - started < 6  # the watchdog's deadline, not a hang
        server.signal(SIGCONT)
        wait_until(lambda: load.statuses[-1:] == ["applied"])
        server.signal(SIGKILL)  # a crash: every pooled connection is dead
        killed = len(load.statuses)
        wait_until(lambda: "queued" in load.statuses[killed:])
        server.start()  # crash recovery
        wait_until(lambda: load.statuses[-1:] == ["applied"])
        load.stop()
        assert load.errors == []
        assert graph.drain(timeout=120)
        for writer, acked in enumerate(load.acked):
            stored = {a.id2 for a in graph.assoc_range(writer + 1, "follows", limit=10_000)}
            assert acked <= stored  # nothing acknowledged is lost
            assert graph.assoc_count(writer + 1, "follows") == len(stored)
        assert graph.check_counts() == []
    finally:
        graph.close()
        PostgresBackend.drop(url)


@pytest.mark.slow
def test_a_killed_server_is_reported_at_once_and_its_return_is_used(
    server: PrivatePostgres,
) -> None:
    """The pooled connections die with the server: the next read tries one, is
    refused a new one at once (the server's own error, not a wait on the pool: its
    wait is 30 s here), and once the server is back the pool serves again."""
    name = f"t{uuid.uuid4().hex[:12]}_refused"
    url = f"postgresql://postgres@127.0.0.1:{PRIVATE_PORT}/{name}?query_timeout=30"
    backend = PostgresBackend.open(url, 1)
    try:
        backend.apply(0, [(1, 1, 2, 0, 3, 4, None)], ())
        assert backend.counts(0, 1, 1) == {0: 1}  # the pool holds a connection
        server.signal(SIGKILL)
        wait_until(lambda: not server.running())
        for _ in range(2):
            started = time.monotonic()
            with pytest.raises(Unavailable, match="Connection refused"):
                backend.counts(0, 1, 1)
            assert time.monotonic() - started < 1.0
        server.start()  # crash recovery
        assert backend.counts(0, 1, 1) == {0: 1}
        assert backend.counts(0, 1, 1) == {0: 1}  # and from the pool again
    finally:
        backend.close()
        PostgresBackend.drop(url)
