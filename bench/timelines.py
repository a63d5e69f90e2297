"""Timelines benchmark (issue 10): fan-out on write against fan-out on read.

1. The cost of a post as the author's follower count N grows (10, 10,000 and
   1,000,000; 100,000 with `--quick`), in each mode: how long the writer
   waits (`post` returns), and how long until every follower has it (the
   background fan-out job reached the last follower), per follower.
2. The cost of a home-timeline page (limit 50) for a reader following F
   accounts (10, 100, 1,000), each with 5 items, in each mode, against the
   same reads in plain sqlite3 on the same files: the packed row read and
   decoded (write); the follow list, one scan per followee and a heapq merge
   (read); both, for the celebrities (hybrid).
3. The crossover: fan-out on write spends N x (delivery per follower) once
   per post; fan-out on read spends (read page - write page) on every page
   view. So write is cheaper when an author's items are viewed more than
   N x delivery / (read - write page) times per post.

Run: `python -m bench timelines [--quick]` (about a minute; --quick: 20 s).

`python -m bench timelines --mariadb` instead measures a second write-mode
page on MariaDB/MySQL (ASSOCDB_BENCH_MYSQL_URL or ASSOCDB_TEST_MYSQL_URL)
through the cache and without it, against the bare blob query (the same
driver, one connection): what caching home lists buys over a network.
"""

from __future__ import annotations

import heapq
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import assocdb
from assocdb.api import timelines as _timelines
from assocdb.core.ids import shard_of
from assocdb.core.timeline_list import entry, unpack

from .timing import compare, row

BASE = 1_600_000_000_000
AUTHOR = 10**15
ITEMS_EACH = 5
MODES = ("write", "read", "hybrid")
CELEBRITY_THRESHOLD = 1000


def post_costs(directory: Path, followers: int) -> dict[str, tuple[float, float]]:
    """mode -> (ms the writer waits, µs per follower until delivered everywhere)."""
    g = assocdb.open(directory / f"post{followers}", shards=8)
    g.define_assoc("follows", inverse="followed_by")
    g.define_timeline("follows")
    started = time.perf_counter()
    g.bulk_load((n, "follows", AUTHOR, BASE + n) for n in range(1, followers + 1))
    load = time.perf_counter() - started
    print(f"  loaded {followers:,} followers in {load:.1f} s", flush=True)
    costs = {}
    for number, mode in enumerate(MODES):
        g.define_timeline("follows", mode=mode, celebrity_threshold=CELEBRITY_THRESHOLD)  # type: ignore[arg-type]
        waits, deliveries = [], []
        for attempt in range(1 if followers > 10_000 else 5):
            start = time.perf_counter()
            last = 1000 * number + attempt + 1
            g.post(AUTHOR, last, BASE + 10 * number + attempt)
            posted = time.perf_counter()
            fanned = mode == "write" or (mode == "hybrid" and followers <= CELEBRITY_THRESHOLD)
            if fanned:
                delivered(g, 1, last)  # follower 1 followed first: the fan-out's last page
            done = time.perf_counter()
            assert g.drain(600)
            waits.append((posted - start) * 1e3)
            deliveries.append((done - start) * 1e6 / followers)
        costs[mode] = (statistics.median(waits), statistics.median(deliveries))
    sample = g.home_timeline(followers, limit=50)
    assert sample.items[0].item == last  # the newest, fanned out or merged in at read time
    g.close()
    return costs


def delivered(g: assocdb.Graph, follower: int, item: int) -> None:
    """Wait until `item` is on the follower's home list (polled every 0.2 ms)."""
    shard = shard_of(follower, g.shards)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        blob = g.engine.backend.timelines(shard, [follower]).get(follower)
        if any(e[1] == item for e in unpack(blob)):
            return
        time.sleep(0.0002)
    raise AssertionError(f"item {item} never reached follower {follower}")


def reader_graph(
    directory: Path, followees: int, cache: assocdb.CacheConfig | None = None
) -> tuple[assocdb.Graph, int]:
    """A reader following `followees` authors with ITEMS_EACH items each, delivered."""
    g = assocdb.open(directory / f"read{followees}", shards=8, cache=cache)
    g.define_assoc("follows", inverse="followed_by")
    g.define_timeline("follows", cap=800)
    reader = 1
    authors = range(100, 100 + followees)
    g.bulk_load((reader, "follows", a, BASE + a) for a in authors)
    posts = [
        (a, 10**6 * a + k, BASE + 7 * k * followees + a) for a in authors for k in range(ITEMS_EACH)
    ]
    g.bulk_load((a, "posted", item, t) for a, item, t in posts)
    # What the fan-out jobs would have delivered: the reader's capped home list.
    shard = shard_of(reader, g.shards)
    g.engine.backend.merge_timelines(shard, {reader: [entry(t, i, a, 1) for a, i, t in posts]}, 800)
    # Hybrid: a tenth of the followees (at least one) are celebrities.
    g.engine.backend.swap_meta(
        "timeline_celebrities", None, _packed(list(authors)[: max(1, followees // 10)])
    )
    return g, reader


def _threaded(read: Callable[[], object]) -> object:
    _timelines.PARALLEL_READS = "always"
    try:
        return read()
    finally:
        _timelines.PARALLEL_READS = "auto"


def _packed(ids: list[int]) -> bytes:
    from array import array

    return array("q", sorted(ids)).tobytes()


class Bare:
    """The same reads in plain sqlite3 on the same shard files: the baselines."""

    SCAN = (
        "SELECT id2, time FROM edges WHERE id1 = ? AND atype = ? AND state = 0 "
        "ORDER BY time DESC, id2 DESC LIMIT ?"
    )

    def __init__(self, g: assocdb.Graph, reader: int, stars: list[int]) -> None:
        root = g.engine.backend.path  # type: ignore[attr-defined]
        self.conns = [sqlite3.connect(root / f"shard-{n:04d}.db") for n in range(g.shards)]
        self.shards = g.shards
        self.reader = reader
        self.stars = stars
        self.follows = g.schema.assoc_type("follows").id
        self.posted = g.schema.assoc_type("posted").id

    def _scan(self, id1: int, atype: int, n: int) -> list[tuple[int, int]]:
        conn = self.conns[shard_of(id1, self.shards)]
        return conn.execute(self.SCAN, (id1, atype, n)).fetchall()

    def _newest(self, authors: list[int]) -> list[tuple[int, int, int]]:
        lists = [[(t, i, a) for i, t in self._scan(a, self.posted, 51)] for a in authors]
        return list(heapq.merge(*lists, reverse=True))[:50]

    def write(self, _: int) -> object:
        conn = self.conns[shard_of(self.reader, self.shards)]
        sql = "SELECT entries FROM timelines WHERE owner = ?"
        (blob,) = conn.execute(sql, (self.reader,)).fetchone()
        return unpack(blob)[:50]

    def read(self, _: int) -> object:
        return self._newest([a for a, _ in self._scan(self.reader, self.follows, 5000)])

    def hybrid(self, _: int) -> object:
        return (self.write(0), self._newest(self.stars))

    def close(self) -> None:
        for conn in self.conns:
            conn.close()


def page_costs(directory: Path, followees: int) -> dict[str, tuple[float, float]]:
    """mode -> (µs per page, µs of the bare baseline), uncached then cached."""
    g, reader = reader_graph(directory, followees)
    expected = g.home_timeline(reader, limit=50, mode="read").items
    for mode in MODES:
        assert g.home_timeline(reader, limit=50, mode=mode).items == expected, mode  # type: ignore[arg-type]
    bare = Bare(g, reader, g._timelines.celebrities())
    costs = {}
    calls = 200 if followees >= 1000 else 1000
    threads = partial(g.home_timeline, reader, limit=50, mode="read")
    with_threads, inline = compare(lambda i: _threaded(threads), lambda i: threads(), calls // 4, 3)
    costs["read, shards on threads"] = (with_threads, inline)
    cached = assocdb.open(g.engine.backend.path, cache=assocdb.CacheConfig())  # type: ignore[attr-defined]
    for label, graph in (("", g), (", cached", cached)):
        for mode in MODES:
            ours, base = compare(
                lambda i, m=mode, gr=graph: gr.home_timeline(reader, limit=50, mode=m),  # type: ignore[misc]
                getattr(bare, mode),
                calls=calls,
                rounds=5,
            )
            costs[mode + label] = (ours, base)
    bare.close()
    cached.close()
    g.close()
    return costs


def mariadb_pages() -> None:
    """A second write-mode page, cached and uncached, on MariaDB (see the module doc)."""
    import uuid

    from assocdb.storage.mysql import MySQLBackend

    from .mysql import connect, server

    url = f"{server()}/tltime{uuid.uuid4().hex[:8]}"
    g = assocdb.open(url, shards=4, journal=":memory:", cache=None)
    cached = None
    try:
        g.define_assoc("follows", inverse="followed_by")
        g.define_timeline("follows", cap=800)
        cached = assocdb.open(url, journal=":memory:", cache=assocdb.CacheConfig())
        conn = connect(g.engine.backend)  # type: ignore[arg-type]
        print(f"timelines on {server()}: a second home page (limit 50), mode write")
        for followees in (10, 100):
            reader = followees
            for author in range(AUTHOR, AUTHOR + followees):
                g.assoc_add(reader, "follows", author)
            for k in range(ITEMS_EACH):
                for n, author in enumerate(range(AUTHOR, AUTHOR + followees)):
                    g.post(author, 10**6 * (n + 1) + 1000 * k + reader, BASE + k * followees + n)
            assert g.drain(60)
            cursor = g.home_timeline(reader, limit=50, mode="write").next_cursor
            page = partial(g.home_timeline, reader, cursor, 50, "write")
            cached_page = partial(cached.home_timeline, reader, cursor, 50, "write")
            assert cached_page() == page()
            sql = g.engine.backend._q(  # type: ignore[attr-defined]
                "SELECT entries FROM {s}.timelines WHERE owner = %s", shard_of(reader, g.shards)
            )

            def bare(_: int, sql: str = sql, reader: int = reader) -> object:
                cur = conn.cursor()
                cur.execute(sql, (reader,))
                (blob,) = cur.fetchone()
                cur.close()
                return unpack(blob)[50:100]

            for label, read in (("uncached", page), ("cached", cached_page)):
                ours, base = compare(lambda i, r=read: r(), bare, calls=300, rounds=5)  # type: ignore[misc]
                label = f"  F={followees} {label}"
                print(row(label, f"{ours:.0f} µs", f"{base:.0f} µs", ours / base, "vs bare query"))
        conn.close()
    finally:
        if cached is not None:
            cached.close()
        g.close()
        MySQLBackend.drop(url)


def main(args: list[str] | None = None) -> None:
    args = sys.argv[1:] if args is None else args
    if "--mariadb" in args:
        mariadb_pages()
        return
    quick = "--quick" in args
    sizes = [10, 10_000, 100_000 if quick else 1_000_000]
    directory = Path(tempfile.mkdtemp(prefix="assocdb-timelines-"))
    try:
        print(f"timelines: 8 shards, celebrity threshold {CELEBRITY_THRESHOLD:,} (hybrid)")
        posts = {n: post_costs(directory, n) for n in sizes}
        print(f"\n{'post, N followers':<24}" + "".join(f"{m:>30}" for m in MODES))
        print(f"{'':<24}" + f"{'writer ms / µs per follower':>30}" * 3)
        for n, costs in posts.items():
            cells = "".join(f"{f'{w:.2f} / {d:.1f}':>30}" for w, d in costs.values())
            print(f"{n:<24,}" + cells)
        pages = {f: page_costs(directory, f) for f in (10, 100, 1000)}
        print("\nhome page (limit 50), F followees      µs per page    bare sqlite3")
        for f, costs in pages.items():
            for mode, (ours, base) in costs.items():
                what = "vs inline" if "threads" in mode else "vs bare sqlite3"
                print(
                    row(f"  F={f:,} {mode}", f"{ours:.0f} µs", f"{base:.0f} µs", ours / base, what)
                )
        print("\ncrossover: write costs N x delivery once per post; read costs (read - write page)")
        print("per page view. Write is cheaper above this many views per post:")
        for n, costs in posts.items():
            delivery_us = costs["write"][1] * n
            cells = []
            for f, page in pages.items():
                extra = page["read"][0] - page["write"][0]
                views = delivery_us / extra if extra > 0 else float("inf")
                cells.append(f"F={f:,}: {views:,.0f}")
            print(f"  N={n:<10,} delivery {delivery_us / 1e3:,.1f} ms   " + "   ".join(cells))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
