"""What the console costs: `PYTHONPATH=src python -m bench.console [edges]`.

Builds a graph of `edges` random follows (default 200,000) on 8 shards, then
times the totals per type (the overview's recount), one sample of the
overview's sampler, and the median latency of each console page served by a
real `assocdb serve` (one keep-alive connection, admin bearer token).
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

import assocdb
from assocdb.api.inventory import type_totals
from assocdb.serve.console.live import Live
from assocdb.serve.metrics import Metrics
from tests.support.http_server import ADMIN, Server

PAGES = ("/admin", "/admin/live", "/admin/shards", "/admin/queue", "/admin/explore?id=5")


def main(argv: list[str]) -> None:
    edges = int(argv[0]) if argv else 200_000
    directory = Path(tempfile.mkdtemp()) / "g"
    rnd = random.Random(1)
    with assocdb.open(directory, shards=8) as g:
        g.define_assoc("follows", inverse="followed_by")
        nodes = max(edges // 10, 2)
        g.bulk_load(
            [(rnd.randrange(1, nodes), "follows", rnd.randrange(1, nodes)) for _ in range(edges)]
        )
        started = time.perf_counter()
        type_totals(g.engine)
        ms = (time.perf_counter() - started) * 1000
        print(f"totals per type, {edges:,} edges on 8 shards: {ms:.1f} ms")
        metrics = Metrics(g)
        live = Live(g, metrics)
        live.sample()  # the first one counts the totals too
        started = time.perf_counter()
        for _ in range(20):
            live.sample()
        print(f"one sample of the sampler: {(time.perf_counter() - started) / 20 * 1000:.2f} ms")
        metrics.close()
    server = Server(directory)
    try:
        with httpx.Client(
            base_url=server.url, headers={"authorization": f"Bearer {ADMIN}"}
        ) as client:
            for path in PAGES:
                times = []
                for _ in range(40):
                    started = time.perf_counter()
                    assert client.get(path).status_code == 200
                    times.append(time.perf_counter() - started)
                print(f"GET {path}: median {statistics.median(times) * 1000:.1f} ms")
    finally:
        server.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
