"""The change feed's read side for `python -m bench feed`: how fast a consumer reads
(`consume_rate`) and how soon a waiting consumer holds an acknowledged write
(`seen_latency`), in process and over HTTP (`assocdb serve`, one process)."""

from __future__ import annotations

import itertools
import random
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import assocdb

from .http import serve

PAGE = 10_000
WRITERS = 8


def consume_rate(
    directory: Path, changes: int, rounds: int, workers: int
) -> dict[str, list[float]]:
    """Changes/s of a consumer reading `changes` records from the start."""
    with assocdb.open(directory, shards=16) as graph:
        graph.define_assoc("follows", inverse="followed_by")
        graph.enable_feed()
        rnd = random.Random(1)
        for start in range(0, changes // 2, 1000):  # two records per write: both legs
            with graph.batch() as batch:
                for n in range(start, min(start + 1000, changes // 2)):
                    batch.assoc_add(rnd.randrange(1, 2_000_000), "follows", 10_000_000 + n)
        local = [_read_all(graph.changes) for _ in range(rounds)]
    runs = {
        "in process": [wall for wall, _ in local],
        "in process, per CPU second": [cpu for _, cpu in local],
    }
    with _served(directory, workers) as (client, _):
        runs["HTTP"] = [wall for wall, _ in (_read_all(client.changes) for _ in range(rounds))]
    return runs


def _read_all(changes: Callable[..., assocdb.ChangePage]) -> tuple[float, float]:
    """Changes/s read, by the wall clock and per CPU second of this process (the steadier
    figure on a busy machine, where the wall clock counts the turns of other processes)."""
    started, cpu, cursor, seen = time.perf_counter(), time.process_time(), None, 0
    while items := (page := changes(cursor, limit=PAGE)).items:
        seen += len(items)
        cursor = page.next_cursor
    return seen / (time.perf_counter() - started), seen / (time.process_time() - cpu)


def seen_latency(
    directory: Path, seconds: float, rounds: int, workers: int
) -> dict[str, tuple[list[float], list[float]]]:
    """p50s and p99s (ms) of acknowledged write → seen, 8 writers, per round."""
    with assocdb.open(directory, shards=16) as graph:
        graph.define_assoc("follows", inverse="followed_by")
        graph.enable_feed()
        local = [_latencies(graph, graph, seconds) for _ in range(rounds)]
    with _served(directory, workers) as (client, url):
        clients = threading.local()

        def writer() -> Any:
            if not hasattr(clients, "c"):
                clients.c = assocdb.Client(url, timeout=30)
            return clients.c

        http = [_latencies(_PerThread(writer), client, seconds) for _ in range(rounds)]
    return {"in process": _quantiles(local), "HTTP": _quantiles(http)}


class _PerThread:
    """`assoc_add` through each thread's own client."""

    def __init__(self, client: Callable[[], Any]) -> None:
        self._client = client

    def assoc_add(self, *args: Any) -> Any:
        return self._client().assoc_add(*args)


def _latencies(writes: Any, reads: Any, seconds: float) -> list[float]:
    """Seconds from each write's acknowledgment to the consumer holding it (≥ 0)."""
    acked: dict[int, float] = {}
    held: dict[int, float] = {}
    ids = itertools.count(int(time.time() * 1000) * 1000)
    cursor = reads.changes(limit=1).next_cursor  # (a first read: the feed's end, below)
    while (page := reads.changes(cursor, limit=PAGE)).items:
        cursor = page.next_cursor
    stop, written = threading.Event(), threading.Event()
    clock = time.perf_counter

    def consume() -> None:
        nonlocal cursor
        while not written.is_set() or not acked.keys() <= held.keys():
            page = reads.changes(cursor, limit=PAGE, types=["follows"], wait=1.0)
            now = clock()
            for change in page.items:
                held.setdefault(change.id2, now)
            cursor = page.next_cursor

    def write() -> None:
        rnd = random.Random()
        while not stop.is_set():
            b = next(ids)
            writes.assoc_add(rnd.randrange(1, 2_000_000), "follows", b)
            acked[b] = clock()

    consumer = threading.Thread(target=consume)
    writers = [threading.Thread(target=write) for _ in range(WRITERS)]
    for thread in [consumer, *writers]:
        thread.start()
    time.sleep(seconds)  # a benchmark's duration, not a test's wait
    stop.set()
    for thread in writers:
        thread.join()
    written.set()
    consumer.join()
    return [max(0.0, held[b] - at) for b, at in acked.items()]


def _quantiles(rounds: list[list[float]]) -> tuple[list[float], list[float]]:
    p50 = [statistics.median(values) * 1000 for values in rounds]
    p99 = [statistics.quantiles(values, n=100)[98] * 1000 for values in rounds]
    return p50, p99


class _served:
    """`assocdb serve DIRECTORY` for the block, and a Client of it."""

    def __init__(self, directory: Path, workers: int) -> None:
        self._directory, self._workers = directory, workers

    def __enter__(self) -> tuple[assocdb.Client, str]:
        port = 18000 + random.randrange(2000)
        self._server = serve(self._directory, port, workers=self._workers, cache_mb=64)
        url = f"http://127.0.0.1:{port}"
        self._client = assocdb.Client(url, timeout=30)
        return self._client, url

    def __exit__(self, *exc: object) -> None:
        self._client.close()
        self._server.terminate()
        self._server.wait()
