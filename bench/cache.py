"""Cache benchmark (issues 7 and 18), every row beside its baseline from the same run:

1. tier-1 hits in process, on the HOT (32) hottest of 1,000 lists of 200 edges
   (16 SQLite shards), whose answers the cache keeps decoded:
   `assoc_range(limit=50)`, the first and the next `assoc_page`, `assoc_get` of
   one id2, `assoc_count` and `obj_get`, each beside the same read with the
   cache off; `assoc_range` also beside a redis-py `ZREVRANGE key 0 49
   WITHSCORES` round trip on a 200-member sorted set, and a hit of a list kept
   packed only (its answer decoded from the packed prefix on every read: the
   1,000 lists with no answers kept). µs per call: thread CPU
   time (`time.thread_time`) and wall time, medians of 7 alternating rounds;
   the Redis ratio compares wall times (a round trip waits, it does not compute);
2. a miss: a page 100,000 deep of a 200,000-edge list with the default cache
   vs the cache off, and vs page 1 with the cache off;
3. the newest 5,000 edges of that list read right after each write to it: the
   write patches the list's kept answer (a dict lookup for the read), vs the
   read with the cache off, and vs the answer dropped by the write and rebuilt
   by the read (thread CPU µs, medians of 3 rounds of 200 writes);
4. memory (tracemalloc beside the cache's own accounting): bytes per cached edge
   over 10,000 lists of 100 edges, each then read as `assoc_range(limit=50)`
   (the answers it offers to keep: those the budget takes, `cache.decoded`), of
   them the packed entries alone; and what a decoded answer costs per edge it holds;
5. the hit rate on the LinkBench mix (preset tiny).

Run: `python -m bench cache` (Redis on 127.0.0.1:6379, or ASSOCDB_TEST_REDIS_URL).
"""

from __future__ import annotations

import gc
import os
import random
import shutil
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import assocdb
from assocdb.cache.tier1 import Cache
from assocdb.core.records import CacheConfig

from .timing import HEADER, row

LISTS, EDGES = 1000, 200
HOT = 32  # the lists read in part 1 (`HotKeys` spares its top 32)
CALLS = 4000
ROUNDS = 7
BASE = 1_700_000_000_000
DEEP = 100_000
CELEBRITY = 10**9

Call = Callable[[int], object]


def per_call(fn: Call, calls: int = CALLS) -> tuple[float, float]:
    """(thread CPU µs, wall µs) per call of `fn(i)` for i in range(calls)."""
    cpu, wall = time.thread_time(), time.perf_counter()
    for i in range(calls):
        fn(i)
    return (time.thread_time() - cpu) / calls * 1e6, (time.perf_counter() - wall) / calls * 1e6


def compare(subject: Call, baseline: Call) -> tuple[tuple[float, float], tuple[float, float]]:
    """Median (cpu, wall) µs per call of subject and baseline, in alternating rounds."""
    per_call(subject, CALLS // 10)
    per_call(baseline, CALLS // 10)
    ours: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    for _ in range(ROUNDS):
        ours.append(per_call(subject))
        theirs.append(per_call(baseline))
    return _median(ours), _median(theirs)


def _median(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def load(directory: Path) -> list[int]:
    """The lists, a celebrity with 2 * DEEP followers, and 1,000 objects (their ids)."""
    with assocdb.open(directory, shards=16) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.define_object("user")
        g.bulk_load(
            (a, "follows", LISTS + a * EDGES + j, BASE + j)
            for a in range(1, LISTS + 1)
            for j in range(EDGES)
        )
        g.bulk_load((CELEBRITY + n, "follows", CELEBRITY, BASE + n) for n in range(2 * DEEP))
        return [g.obj_add("user", {"name": f"user {n}", "n": n}) for n in range(1000)]


def hits(directory: Path, objects: list[int]) -> list[str]:
    """The rows of part 1."""
    cached = assocdb.open(directory, cache=CacheConfig(max_age=3600))
    plain = assocdb.open(directory, cache=None)
    people = [random.Random(5).randrange(1, HOT + 1) for _ in range(CALLS)]
    cursors = {p: plain.assoc_page(p, "follows", limit=50).next_cursor for p in set(people)}
    reads: dict[str, Callable[[assocdb.Graph], Call]] = {
        "assoc_range(50)": lambda g: lambda i: g.assoc_range(people[i], "follows", limit=50),
        "assoc_page(50), first": lambda g: lambda i: g.assoc_page(people[i], "follows"),
        "assoc_page(50), next": lambda g: (
            lambda i: g.assoc_page(people[i], "follows", cursors[people[i]])
        ),
        "assoc_get(one id2)": lambda g: (
            lambda i: g.assoc_get(people[i], "follows", [LISTS + people[i] * EDGES + i % EDGES])
        ),
        "assoc_count": lambda g: lambda i: g.assoc_count(people[i], "follows"),
        "obj_get": lambda g: lambda i: g.obj_get(objects[i % len(objects)]),
    }
    lines = []
    ranged = None
    for name, read in reads.items():
        ours, theirs = read(cached), read(plain)
        for _ in range(3):  # fill, then keep the answers
            per_call(ours)
        (cpu, wall), (plain_cpu, _) = compare(ours, theirs)
        ranged = ranged or (cpu, wall)
        lines.append(
            row(
                f"{name} hit vs uncached, CPU µs",
                f"{cpu:.2f}",
                f"{plain_cpu:.2f}",
                plain_cpu / cpu,
                "<= 5 µs" if name.startswith("assoc_range") else "fast",
            )
        )
    assert ranged is not None
    lines.append(_packed_hit(directory, plain))
    redis_wall = _redis()
    lines.append(
        row(
            "assoc_range(50) hit vs ZREVRANGE 0 49, wall µs",
            f"{ranged[1]:.2f}",
            f"{redis_wall:.2f}",
            redis_wall / ranged[1],
            ">= 30x faster",
        )
    )
    stats = cached.cache_stats()
    cached.close()
    plain.close()
    assert stats is not None
    lines.append(f"{'(hit rate of the cached graph above)':<44} {stats.hit_rate:>14.4f}")
    return lines


def _packed_hit(directory: Path, plain: assocdb.Graph) -> str:
    """The row of an `assoc_range(50)` hit of lists whose answers are not kept (any of
    the 1,000): the packed prefix decoded by each read."""
    packed = assocdb.open(directory, cache=CacheConfig(max_age=3600))
    cache = packed.engine.cache
    assert cache is not None
    cache.decoded.floor = cache.decoded.ceiling = cache.decoded.room = 0  # none is kept
    people = [random.Random(6).randrange(1, LISTS + 1) for _ in range(CALLS)]
    ours: Call = lambda i: packed.assoc_range(people[i], "follows", limit=50)  # noqa: E731
    theirs: Call = lambda i: plain.assoc_range(people[i], "follows", limit=50)  # noqa: E731
    for _ in range(3):  # fill
        per_call(ours)
    (cpu, _), (plain_cpu, _) = compare(ours, theirs)
    assert cache.decoded.count == 0
    packed.close()
    return row(
        "assoc_range(50) hit, packed only, CPU µs",
        f"{cpu:.2f}",
        f"{plain_cpu:.2f}",
        plain_cpu / cpu,
        "faster than uncached",
    )


def _redis() -> float:
    """Wall µs of a ZREVRANGE 0 49 WITHSCORES round trip on a 200-member sorted set."""
    import redis

    url = os.environ.get("ASSOCDB_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    r = redis.Redis.from_url(url)
    r.delete("bench:list")
    r.zadd("bench:list", {str(LISTS + j): BASE + j for j in range(EDGES)})
    per_call(lambda i: r.zrevrange("bench:list", 0, 49, withscores=True), CALLS // 10)
    walls = [per_call(lambda i: r.zrevrange("bench:list", 0, 49, withscores=True))[1]]
    walls += [per_call(lambda i: r.zrevrange("bench:list", 0, 49, withscores=True))[1]]
    walls += [per_call(lambda i: r.zrevrange("bench:list", 0, 49, withscores=True))[1]]
    r.delete("bench:list")
    return statistics.median(walls)


def miss(directory: Path) -> list[str]:
    """The rows of part 2: a deep page, cache on vs off, and vs page 1 uncached."""
    cached = assocdb.open(directory)  # the default cache
    plain = assocdb.open(directory, cache=None)
    cursor, depth = None, 0
    while depth < DEEP:
        page = plain.assoc_page(CELEBRITY, "followed_by", cursor, limit=5000)
        depth += len(page.items)
        cursor = page.next_cursor
    cached.assoc_page(CELEBRITY, "followed_by", limit=50)  # the list's prefix is cached

    def deep_cached(i: int) -> object:
        return cached.assoc_page(CELEBRITY, "followed_by", cursor, limit=50)

    def deep_plain(i: int) -> object:
        return plain.assoc_page(CELEBRITY, "followed_by", cursor, limit=50)

    def first_plain(i: int) -> object:
        return plain.assoc_page(CELEBRITY, "followed_by", limit=50)

    (on, _), (off, _) = compare(deep_cached, deep_plain)
    (deep, _), (first, _) = compare(deep_plain, first_plain)
    cached.close()
    plain.close()
    return [
        row(
            "page 100k deep: cache on vs off, CPU µs",
            f"{on:.1f}",
            f"{off:.1f}",
            on / off,
            "<= 1.2x",
        ),
        row(
            "page 100k deep vs page 1 (no cache), CPU µs",
            f"{deep:.1f}",
            f"{first:.1f}",
            deep / first,
            "<= 1.2x",
        ),
    ]


def after_writes(directory: Path, limit: int = 5000, writes: int = 200) -> list[str]:
    """The rows of part 3: the newest `limit` of a long list, read right after each
    write to it (a new follower of the celebrity), with the cache patching the
    list's kept answer; with the answer dropped by each write, rebuilt by the read
    (as before writes patched answers); and with the cache off."""
    cached = assocdb.open(directory, cache=CacheConfig(prefix=limit + 1, max_age=3600))
    plain = assocdb.open(directory, cache=None)
    cache = cached.engine.cache
    assert cache is not None
    patch = cache.patch_answer
    follower = iter(range(CELEBRITY + 4 * DEEP, CELEBRITY + 5 * DEEP))

    def read_after_write(g: assocdb.Graph) -> float:
        """Thread CPU µs per read, each right after a write (through the cached graph,
        which every graph here reads: they share the directory)."""
        spent = 0.0
        for _ in range(writes):
            cached.assoc_add(next(follower), "follows", CELEBRITY)
            cpu = time.thread_time()
            g.assoc_range(CELEBRITY, "followed_by", 0, limit)
            spent += time.thread_time() - cpu
        return spent / writes * 1e6

    def with_patches(on: bool) -> float:
        cache.patch_answer = patch if on else None
        cached.assoc_range(CELEBRITY, "followed_by", 0, limit)  # keeps the answer
        return read_after_write(cached)

    samples: dict[str, list[float]] = {"patched": [], "dropped": [], "uncached": []}
    for _ in range(3):
        samples["patched"].append(with_patches(True))
        samples["dropped"].append(with_patches(False))
        samples["uncached"].append(read_after_write(plain))
    cached.close()
    plain.close()
    patched, dropped, uncached = (statistics.median(v) for v in samples.values())
    what = f"range({limit}) after write"
    return [
        row(
            f"{what} vs uncached, CPU µs",
            f"{patched:.1f}",
            f"{uncached:.1f}",
            uncached / patched,
            "fast",
        ),
        row(
            f"{what} vs rebuilt, CPU µs",
            f"{patched:.1f}",
            f"{dropped:.1f}",
            dropped / patched,
            "reported",
        ),
    ]


def packed_bytes_per_edge(lists: int = 10_000, per_list: int = 100) -> tuple[float, float]:
    """(tracemalloc, accounted) bytes per edge of packed entries, edges without data."""
    rows = [(id2, BASE + id2, (BASE + id2) * 1000 + 7, None) for id2 in range(per_list, 0, -1)]
    gc.collect()
    tracemalloc.start()
    cache = Cache(CacheConfig(max_bytes=1 << 40, max_age=3600))
    before = tracemalloc.get_traced_memory()[0]
    for id1 in range(1, lists + 1):
        cache._install(("prefix", (id1 * 7919, 1)), (rows, True))  # the whole list
    measured = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return measured / (lists * per_list), cache.bytes / (lists * per_list)


def read_bytes_per_edge(lists: int = 10_000, per_list: int = 100) -> tuple[float, float, int]:
    """(tracemalloc, accounted) bytes per edge of a cache of `lists` lists of `per_list`
    edges, each then read once as `assoc_range(limit=50)`: its 50 records offered to
    the cache to keep (as the read does), and how many answers were kept."""
    from assocdb.api.kept import column_records

    gc.collect()
    tracemalloc.start()
    cache = Cache(CacheConfig(max_age=3600))  # the default max_bytes: 128 MiB
    before = tracemalloc.get_traced_memory()[0]
    for id1 in range(1, lists + 1):
        key = (id1 * 7919, 1)
        # Ints of their own per list, as a read's records hold (shared ones undercount).
        id2s = [id1 * 1000 + j for j in range(per_list, 0, -1)]
        times = [BASE + id2 for id2 in id2s]
        stamps = [t * 1000 + 7 for t in times]
        rows = list(zip(id2s, times, stamps, [None] * per_list, strict=True))
        cache._install(("prefix", key), (rows, True))  # the whole list
        answers = cache.answers(key)
        found = column_records(key[0], "follows", id2s[:50], times[:50], stamps[:50], [None] * 50)
        del rows, id2s, times, stamps
        cache.keep(key, answers, (0, 50), tuple(found), len(found))
    del found
    gc.collect()
    measured = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    edges = lists * per_list
    return measured / edges, cache.bytes / edges, cache.decoded.count


def decoded_bytes_per_edge(directory: Path) -> tuple[float, float]:
    """(tracemalloc, accounted) bytes per edge of the answers kept for assoc_range(50)."""
    g = assocdb.open(directory, cache=CacheConfig(max_age=3600, max_bytes=1 << 32))
    people = range(1, LISTS + 1)
    for _ in range(2):
        for p in people:
            g.assoc_range(p, "follows", limit=50)  # a miss, then the fill
    cache = g.engine.cache
    assert cache is not None
    if not hasattr(cache, "decoded"):  # older code, measured with this bench
        g.close()
        return float("nan"), float("nan")
    cache.decoded.clear()
    for entry in cache._lists.values():
        cache.bytes -= entry.answer_bytes
        entry.answers, entry.answer_bytes = {}, 0
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for p in people:
        g.assoc_range(p, "follows", limit=50)  # keep the answer
    gc.collect()
    measured = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    edges = cache.decoded.count * 50  # (those the budget took)
    accounted = cache.decoded.bytes / edges
    g.close()
    return measured / edges, accounted


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
        objects = load(directory / "graph")
        lines = hits(directory / "graph", objects)
        lines += miss(directory / "graph")
        lines += after_writes(directory / "graph")
        decoded, decoded_accounted = decoded_bytes_per_edge(directory / "graph")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    packed, packed_accounted = packed_bytes_per_edge()
    total, total_accounted, answers = read_bytes_per_edge()
    print(
        f"cache benchmark ({LISTS:,} lists of {EDGES} edges, 16 SQLite shards; "
        f"medians of {ROUNDS} alternating rounds of {CALLS:,} calls)"
    )
    print(HEADER)
    for line in lines:
        print(line)
    print(
        row(
            "B/edge, 10k lists x 100, read (accounted)",
            f"{total:.1f}",
            f"{total_accounted:.1f}",
            total / total_accounted,
            "<= 32 bytes",
        )
        + f"  ({answers:,} answers kept)"
    )
    print(
        row(
            "packed B/edge, 10k lists x 100 (accounted)",
            f"{packed:.1f}",
            f"{packed_accounted:.1f}",
            packed / packed_accounted,
            "<= 24 bytes",
        )
    )
    print(
        row(
            "kept answers B/edge (accounted)",
            f"{decoded:.1f}",
            f"{decoded_accounted:.1f}",
            decoded / decoded_accounted,
            "reported; <= 25% of max_bytes",
        )
    )
    print(f"LinkBench tiny, assocdb: {linkbench_hit_rate()}")


if __name__ == "__main__":
    main()
