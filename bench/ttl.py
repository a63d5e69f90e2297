"""Expiring edges (issue 39): what a ttl costs a read, and the expiry pass's rate.

1. tier-1 hits on 500 lists of 200 edges (4 SQLite shards): `assoc_range(limit=50)`,
   `assoc_count` and the first `assoc_page(limit=50)` of a type with a ttl (a day;
   nothing expired) beside the same read of the same list as a type without one;
   thread CPU µs per call, medians of 7 alternating rounds;
2. the same reads with the cache off;
3. one expiry pass over a graph of N edges with an inverse, half of them expired:
   expired edges removed per second (both legs), and the pass's rows read per second.

Run: `python -m bench ttl [--edges N]` (default 100,000 for the pass).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import assocdb

from .timing import HEADER, compare, row

LISTS = 500
EDGES = 200
CALLS = 4000
DAY = 86_400


def load(path: Path, cache: assocdb.CacheConfig | None) -> assocdb.Graph:
    g = assocdb.open(path, shards=4, cache=cache)
    g.define_assoc("plain")
    g.define_assoc("expiring", ttl=DAY)
    now = int(time.time() * 1000)
    if g.assoc_count(1, "plain") == 0:
        g.bulk_load(
            (id1, atype, 1_000 + n, now - n)
            for atype in ("plain", "expiring")
            for id1 in range(1, LISTS + 1)
            for n in range(EDGES)
        )
    return g


def reads(g: assocdb.Graph, label: str) -> list[str]:
    lines = []
    calls = {
        "assoc_range(50)": lambda t: lambda i: g.assoc_range(1 + i % LISTS, t, 0, 50),
        "assoc_count": lambda t: lambda i: g.assoc_count(1 + i % LISTS, t),
        "assoc_page(50), first": lambda t: lambda i: g.assoc_page(1 + i % LISTS, t, None, 50),
    }
    for name, make in calls.items():
        ttl_us, plain_us = compare(make("expiring"), make("plain"), CALLS, 7)
        lines.append(
            row(
                f"{name} {label}: ttl vs none, µs",
                f"{ttl_us:.2f}",
                f"{plain_us:.2f}",
                ttl_us / plain_us,
                "plain type unchanged",
            )
        )
    return lines


def expiry_pass(path: Path, edges: int) -> str:
    g = assocdb.open(path, shards=4, cache=None)
    g.define_assoc("seen", inverse="seen_by", ttl=DAY)
    now = int(time.time() * 1000)
    g.bulk_load(
        (1 + n % 1000, "seen", 10_000 + n, now - (2 * DAY * 1000 if n % 2 else 0))
        for n in range(edges)
    )
    start = time.perf_counter()
    found = g.services.expiry.expire()
    seconds = time.perf_counter() - start
    g.close()
    rows = 2 * edges
    return (
        f"expiry pass: {edges:,} edges (2 legs), half expired: {found:,} expired rows found, "
        f"{edges // 2 / seconds:,.0f} expired edges removed/s, {rows / seconds:,.0f} rows read/s"
    )


def main(args: list[str]) -> None:
    options = dict(zip(args[::2], args[1::2], strict=False))
    edges = int(options.get("--edges", 100_000))
    directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-ttl-"))
    try:
        cached = load(directory / "graph", assocdb.CacheConfig())
        lines = reads(cached, "hit")
        cached.close()
        bare = load(directory / "graph", None)
        lines += reads(bare, "uncached")
        bare.close()
        lines.append(expiry_pass(directory / "pass", edges))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(f"ttl benchmark ({LISTS} lists of {EDGES} edges per type, 4 SQLite shards)")
    print(HEADER)
    for line in lines:
        print(line)
