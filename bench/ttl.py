"""Expiring edges (issue 39): what a ttl costs a read, and the expiry pass's rate.

1. tier-1 hits on 500 lists of 200 edges (4 SQLite shards): `assoc_range(limit=50)`,
   `assoc_count` and the first `assoc_page(limit=50)` of a type with a ttl (a day;
   nothing expired) beside the same read of the same list as a type without one;
   thread CPU µs per call, medians of 7 alternating rounds;
2. the same reads with the cache off;
3. one expiry pass over a graph of N edges of a type with a ttl and an inverse, half of
   them expired, beside P edges (all old) of a type without a ttl: expired edges
   removed per second (both legs), and the graph's stored rows over the pass's time.

Run: `python -m bench ttl [--edges N] [--plain P] [--pass-only 1]` (defaults 100,000 and
400,000 for the pass).
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


def expiry_pass(path: Path, edges: int, plain: int) -> str:
    g = assocdb.open(path, shards=4, cache=None)
    g.define_assoc("seen", inverse="seen_by", ttl=DAY)
    g.define_assoc("knows", inverse="known_by")
    now = int(time.time() * 1000)
    g.bulk_load(
        (1 + n % 1000, "seen", 10_000 + n, now - (2 * DAY * 1000 if n % 2 else 0))
        for n in range(edges)
    )
    g.bulk_load((1 + n % 1000, "knows", 10_000 + n, now - 2 * DAY * 1000) for n in range(plain))
    start = time.perf_counter()
    found = g.services.expiry.expire()
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    again = g.services.expiry.expire()
    idle = time.perf_counter() - start
    g.close()
    rows = 2 * (edges + plain)
    return (
        f"expiry pass: {edges:,} ttl edges (2 legs), half expired, beside {plain:,} edges "
        f"without a ttl: {found:,} expired edges removed in {seconds:.2f} s, "
        f"{edges // 2 / seconds:,.0f} expired edges removed/s, "
        f"{rows / seconds:,.0f} graph rows/s (stored rows over the pass's time); "
        f"the next pass ({again} expired): {idle:.2f} s, {rows / idle:,.0f} graph rows/s"
    )


def main(args: list[str]) -> None:
    options = dict(zip(args[::2], args[1::2], strict=False))
    edges = int(options.get("--edges", 100_000))
    plain = int(options.get("--plain", 400_000))
    directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-ttl-"))
    try:
        if options.get("--pass-only"):
            print(expiry_pass(directory / "pass", edges, plain))
            return
        cached = load(directory / "graph", assocdb.CacheConfig())
        lines = reads(cached, "hit")
        cached.close()
        bare = load(directory / "graph", None)
        lines += reads(bare, "uncached")
        bare.close()
        lines.append(expiry_pass(directory / "pass", edges, plain))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(f"ttl benchmark ({LISTS} lists of {EDGES} edges per type, 4 SQLite shards)")
    print(HEADER)
    for line in lines:
        print(line)
