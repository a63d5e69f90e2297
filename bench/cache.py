"""Cache benchmark (issue 7), in one run:

1. `assoc_range(limit=50)` and `assoc_count` on ego-Facebook friend lists:
   cached in-process vs uncached (the same graph, cache off) vs the bare SQL
   query vs a Redis round trip (`ZREVRANGE key 0 49 WITHSCORES` on a
   1,000-member sorted set; `GET` for the count);
2. bytes per cached edge, measured with tracemalloc, for 1,000,000 cached
   edges (1,000 lists of 1,000), against the same edges as Python tuples;
3. the cache's hit rate on the LinkBench mix (preset tiny).

Run: `python -m bench cache` (Redis on 127.0.0.1:6379, or ASSOCDB_TEST_REDIS_URL).
"""

from __future__ import annotations

import gc
import os
import random
import shutil
import sqlite3
import tempfile
import tracemalloc
from pathlib import Path

import assocdb
from assocdb.cache.tier1 import Cache
from assocdb.cli.datasets import ego_facebook
from assocdb.core.ids import shard_of
from assocdb.core.records import CacheConfig

from .timing import per_call_us

PEOPLE = 4039
CALLS = 4000
RANGE_SQL = (
    "SELECT id2, time, updated_at, data FROM edges WHERE id1 = ? AND atype = ? AND state = 0 "
    "ORDER BY time DESC, id2 DESC LIMIT 50"
)
COUNT_SQL = "SELECT n FROM counts WHERE id1 = ? AND atype = ? AND state = 0"


def reads(directory: Path) -> dict[str, tuple[float, float]]:
    """µs per call of (assoc_range(limit=50), assoc_count) for each contender."""
    with assocdb.open(directory, shards=16) as g:
        g.define_assoc("friend", symmetric=True)
        g.bulk_load((a, "friend", b, n) for n, (a, b) in enumerate(ego_facebook()))
    people = [random.Random(5).randrange(1, PEOPLE + 1) for _ in range(CALLS)]
    results = {}
    for name, cache in (
        ("assocdb, cached", CacheConfig(max_age=3600)),
        ("assocdb, uncached", None),
    ):
        g = assocdb.open(directory, cache=cache)
        for p in people:  # fill (or warm SQLite's page cache)
            g.assoc_range(p, "friend", limit=50)
            g.assoc_count(p, "friend")
        ranged = _best(lambda i, g=g: g.assoc_range(people[i], "friend", limit=50))
        counted = _best(lambda i, g=g: g.assoc_count(people[i], "friend"))
        results[name] = (ranged, counted)
        g.close()
    conns = [sqlite3.connect(directory / f"shard-{s:04d}.db") for s in range(16)]
    shards = [shard_of(p, 16) for p in people]
    results["bare SQL, same index"] = (
        _best(lambda i: conns[shards[i]].execute(RANGE_SQL, (people[i], 1)).fetchall()),
        _best(lambda i: conns[shards[i]].execute(COUNT_SQL, (people[i], 1)).fetchall()),
    )
    results["Redis round trip"] = _redis()
    return results


def _redis() -> tuple[float, float]:
    import redis

    url = os.environ.get("ASSOCDB_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    r = redis.Redis.from_url(url)
    r.delete("bench:list", "bench:count")
    r.zadd("bench:list", {str(n): n for n in range(1000)})
    r.set("bench:count", 1000)
    ranged = _best(lambda i: r.zrevrange("bench:list", 0, 49, withscores=True))
    counted = _best(lambda i: r.get("bench:count"))
    r.delete("bench:list", "bench:count")
    return ranged, counted


def _best(call: object) -> float:
    return min(per_call_us(call, CALLS) for _ in range(5))  # type: ignore[arg-type]


def bytes_per_edge() -> tuple[float, float]:
    """(cached bytes per edge, Python-tuple bytes per edge) for 1M edges without data."""
    lists, per_list = 1000, 1000
    base = 1_700_000_000_000
    rows = [[(id2, base + id2, (base + id2) * 1000 + 7, None) for id2 in range(per_list, 0, -1)]]
    gc.collect()
    tracemalloc.start()
    cache = Cache(CacheConfig(max_bytes=1 << 40, prefix=per_list, max_age=3600))
    before = tracemalloc.get_traced_memory()[0]
    for id1 in range(1, lists + 1):
        cache._install(("prefix", (id1, 1)), rows[0])
    cached = tracemalloc.get_traced_memory()[0] - before
    tuples = [[(base + n, n, (base + n) * 1000 + 7) for n in range(per_list)] for _ in range(lists)]
    with_tuples = tracemalloc.get_traced_memory()[0] - before - cached
    tracemalloc.stop()
    del tuples
    return cached / (lists * per_list), with_tuples / (lists * per_list)


def linkbench_hit_rate() -> str:
    import contextlib
    import io

    from .linkbench import cli as linkbench

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        linkbench.main(["--preset", "tiny", "--stores", "assocdb"])
    lines = [line for line in buffer.getvalue().splitlines() if "cache hit rate" in line]
    return lines[0].strip() if lines else "n/a"


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-cache-"))
    try:
        results = reads(directory / "graph")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    cached_bytes, tuple_bytes = bytes_per_edge()
    print("cache benchmark (ego-Facebook friend lists, limit=50; µs per call, best of 5 rounds)")
    print(f"{'':<24} {'assoc_range':>12} {'assoc_count':>12}")
    for name, (ranged, counted) in results.items():
        print(f"{name:<24} {ranged:>12.1f} {counted:>12.1f}")
    print(
        f"bytes per cached edge (1M edges, tracemalloc): {cached_bytes:.1f} "
        f"(as Python tuples: {tuple_bytes:.1f}; target <= 24)"
    )
    print(f"LinkBench tiny, assocdb: {linkbench_hit_rate()}")


if __name__ == "__main__":
    main()
