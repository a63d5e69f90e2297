"""Thrift benchmark (issue 22): FlockDB's interface against the HTTP API, same graph, same run.

One graph (`follows`, 2,000 people following 50 each, random times), served
at once by `assocdb serve-thrift` and `assocdb serve` (one process each, the
same 256 MiB cache). Client threads call for a fixed time:

* select: the first page (50) of a random person's followings: Thrift
  `select` of a SimpleQuery against `Client.select(...).page(limit=50)`;
* select2 of an intersection: two people's followings, first page;
* execute: one durable follow (priority High: applied before the answer)
  against `Client.assoc_add`.

Calls/s and median latency per protocol; the clients (thriftpy2, httpx) run
on the same machine and share its cores with the servers.

Run: `python -m bench thrift [--seconds 4] [--threads 4]`
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import assocdb
from assocdb import Client
from tests.support.http_server import Server
from tests.support.thrift_server import Flock, ThriftServer

PEOPLE = 2_000
FOLLOWS = 50
CACHE = ("--cache-mb", "256")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench thrift")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "graph"
        _load(directory)
        thrift = ThriftServer(directory, *CACHE)
        http = Server(directory, False, *CACHE)
        try:
            _run(thrift, http, args.seconds, args.threads)
        finally:
            thrift.stop()
            http.stop()


def _load(directory: Path) -> None:
    rnd = random.Random(7)
    with assocdb.open(directory, shards=8) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.bulk_load(
            (a, "follows", b, rnd.randrange(10**12, 2 * 10**12))
            for a in range(1, PEOPLE + 1)
            for b in rnd.sample(range(1, PEOPLE + 1), FOLLOWS)
        )


def _run(thrift: ThriftServer, http: Server, seconds: float, threads: int) -> None:
    print(f"thrift vs http: {PEOPLE:,} people x {FOLLOWS} follows, {threads} client threads")
    print(
        f"{'call':<34}{'thrift/s':>10}{'http/s':>10}{'ratio':>7}{'p50 thrift':>12}{'p50 http':>10}"
    )
    for name, flock_call, rest_call in _calls():
        t_rate, t_p50 = _measure(lambda: Flock(thrift.client()), flock_call, seconds, threads)
        h_rate, h_p50 = _measure(lambda: Client(http.url), rest_call, seconds, threads)
        print(
            f"{name:<34}{t_rate:>10,.0f}{h_rate:>10,.0f}{t_rate / h_rate:>7.2f}"
            f"{t_p50 * 1e3:>10.2f}ms{h_p50 * 1e3:>8.2f}ms"
        )


Call = Callable[[Any, random.Random], object]


def _calls() -> list[tuple[str, Call, Call]]:
    def flock_select(f: Flock, rnd: random.Random) -> object:
        return f.select(f.simple(f.term(rnd.randint(1, PEOPLE))), 50)

    def rest_select(c: Client, rnd: random.Random) -> object:
        return c.select(rnd.randint(1, PEOPLE), "follows").page(limit=50)

    def flock_both(f: Flock, rnd: random.Random) -> object:
        a, b = rnd.randint(1, PEOPLE), rnd.randint(1, PEOPLE)
        return f.select([*f.simple(f.term(a)), *f.simple(f.term(b)), f.op(2)], 50)

    def rest_both(c: Client, rnd: random.Random) -> object:
        a, b = rnd.randint(1, PEOPLE), rnd.randint(1, PEOPLE)
        return (c.select(a, "follows") & c.select(b, "follows")).page(limit=50)

    def flock_add(f: Flock, rnd: random.Random) -> object:
        a, b = rnd.randint(1, PEOPLE), rnd.randint(PEOPLE + 1, 100 * PEOPLE)
        f.execute(1, f.term(a, ids=[b]))
        return None

    def rest_add(c: Client, rnd: random.Random) -> object:
        a, b = rnd.randint(1, PEOPLE), rnd.randint(PEOPLE + 1, 100 * PEOPLE)
        return c.assoc_add(a, "follows", b)

    return [
        ("select, first page of 50", flock_select, rest_select),
        ("select, intersection of two", flock_both, rest_both),
        ("execute / assoc_add (durable)", flock_add, rest_add),
    ]


def _measure(
    connect: Callable[[], Any], call: Call, seconds: float, threads: int
) -> tuple[float, float]:
    """Calls/s of `threads` clients for `seconds`, and the median latency."""
    latencies: list[list[float]] = [[] for _ in range(threads)]
    start = threading.Barrier(threads + 1)
    stop = threading.Event()

    def worker(n: int) -> None:
        client = connect()
        rnd = random.Random(n)
        call(client, rnd)  # warm: the connection is open
        start.wait()
        mine = latencies[n]
        while not stop.is_set():
            began = time.perf_counter()
            call(client, rnd)
            mine.append(time.perf_counter() - began)
        close = getattr(client, "close", None) or client.c.close
        close()

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    began = time.perf_counter()
    time.sleep(seconds)  # the measuring window
    stop.set()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - began
    every = [x for mine in latencies for x in mine]
    return len(every) / elapsed, statistics.median(every)
