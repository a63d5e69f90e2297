"""A cascading deletion's rate, and what it costs other writers (issue 39).

    python -m bench deletion [--edges N] [--runs R] [--deep P]

Each run loads a fresh graph (4 SQLite shards) where one user has N followers
(`follows`/`followed_by`, shallow: N edges, 2N rows, counts on both sides) and
measures, in the same run:

* the cascade: `obj_delete(user, cascade=True)` until `deletions.wait()`
  returns, in edges/s, against the *bare baseline*: the same N edges removed
  by `assoc_delete` in `batch()`es of 500 (the store's fastest removal, with
  nothing recorded for a restore) on a graph loaded alike;
* another client's writes: one thread doing `assoc_add` between other users,
  one at a time, during the cascade, beside the same thread on the quiet
  store just before (p50 and p99 latency).

Medians over the runs, with the spread (min to max).

With `--deep P`: instead, a user owning P posts (`authored`, deep), each liked once
(shallow), deleted with `cascade=True`: the cascade's objects per second until done.
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

import assocdb

ROOT = 1
BATCH = 500


def _graph(path: Path, edges: int) -> assocdb.Graph:
    graph = assocdb.open(path, shards=4)
    graph.define_assoc("follows", inverse="followed_by", on_delete="shallow")
    graph.define_assoc("followed_by", inverse="follows", on_delete="shallow")
    graph.define_object("user")
    graph.obj_add("user", {"name": "celebrity"}, id=ROOT)
    graph.bulk_load(((10**6 + f, "follows", ROOT, f + 1) for f in range(edges)), workers=1)
    return graph


def _writer(graph: assocdb.Graph, stop: threading.Event, out: list[float]) -> None:
    rng = random.Random(7)
    while not stop.is_set():
        a, b = rng.randrange(10**8, 2 * 10**8), rng.randrange(10**8, 2 * 10**8)
        start = time.perf_counter()
        graph.assoc_add(a, "follows", b)
        out.append(time.perf_counter() - start)


def _with_writer(graph: assocdb.Graph, work: Callable[[], None]) -> tuple[float, list[float]]:
    """Seconds `work` took, and the writer's latencies meanwhile."""
    stop, latencies = threading.Event(), []
    thread = threading.Thread(target=_writer, args=(graph, stop, latencies))
    thread.start()
    start = time.perf_counter()
    work()
    took = time.perf_counter() - start
    stop.set()
    thread.join()
    return took, latencies


def _quiet(graph: assocdb.Graph, seconds: float) -> list[float]:
    done = threading.Event()
    return _with_writer(graph, lambda: done.wait(seconds))[1]


def _cascade(graph: assocdb.Graph) -> None:
    graph.obj_delete(ROOT, cascade=True)
    assert graph.deletions.wait(3600)


def _bare(graph: assocdb.Graph, edges: int) -> None:
    for start in range(0, edges, BATCH):
        with graph.batch() as batch:
            for f in range(start, min(start + BATCH, edges)):
                batch.assoc_delete(10**6 + f, "follows", ROOT)


def _deep(path: Path, posts: int) -> tuple[float, assocdb.Deletion]:
    """A user owning `posts` posts (`authored`, deep), each liked by one other user
    (`likes`, shallow): the cascade's seconds until it is done, and its report."""
    graph = assocdb.open(path, shards=4)
    graph.define_assoc("authored", inverse="author", on_delete="deep")
    graph.define_assoc("author", inverse="authored", on_delete="shallow")
    graph.define_assoc("likes", inverse="liked_by", on_delete="shallow")
    graph.define_assoc("liked_by", inverse="likes", on_delete="shallow")
    graph.define_assoc("follows", inverse="followed_by", on_delete="shallow")
    graph.define_assoc("followed_by", inverse="follows", on_delete="shallow")
    graph.define_object("user")
    graph.define_object("post", owned=True)
    graph.obj_add("user", {"name": "author"}, id=ROOT)
    first = 10**6
    for start in range(0, posts, BATCH):
        with graph.batch() as batch:
            for p in range(start, min(start + BATCH, posts)):
                batch.obj_add("post", {"n": p}, id=first + p)
    graph.bulk_load(((ROOT, "authored", first + p, p + 1) for p in range(posts)), workers=1)
    graph.bulk_load(((2, "likes", first + p, p + 1) for p in range(posts)), workers=1)
    took = time.perf_counter()
    graph.obj_delete(ROOT, cascade=True)
    assert graph.deletions.wait(3600)
    took = time.perf_counter() - took
    report = graph.deletions.of_object(ROOT)
    assert report.objects == {"post": posts, "user": 1}, report
    assert graph.assoc_count(2, "likes") == 0
    graph.close()
    return took, report


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench deletion")
    parser.add_argument("--edges", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--deep", type=int, default=0, help="a user owning N deep posts")
    options = parser.parse_args(args)
    if options.deep:
        rates = []
        for _ in range(options.runs):
            with tempfile.TemporaryDirectory() as tmp:
                took, report = _deep(Path(tmp) / "deep", options.deep)
            rates.append((options.deep + 1) / took)
        print(
            f"cascade of a user owning {options.deep:,} deep posts (each liked once), "
            f"{options.runs} runs: {statistics.median(rates):,.0f} objects/s "
            f"({min(rates):,.0f} to {max(rates):,.0f}); removed {report.objects}, {report.edges}"
        )
        return
    n = options.edges
    rows: dict[str, list[float]] = {}
    for _ in range(options.runs):
        with tempfile.TemporaryDirectory() as tmp:
            with _graph(Path(tmp) / "bare", n) as graph:
                took = time.perf_counter()
                _bare(graph, n)
                rows.setdefault("bare", []).append(n / (time.perf_counter() - took))
            with _graph(Path(tmp) / "cascade", n) as graph:
                took, during = _with_writer(graph, lambda g=graph: _cascade(g))  # type: ignore[misc]
                quiet = _quiet(graph, took)
                assert graph.assoc_count(ROOT, "followed_by") == 0
            rows.setdefault("cascade", []).append(n / took)
            rows.setdefault("quiet p50", []).append(_pct(quiet, 0.5))
            rows.setdefault("quiet p99", []).append(_pct(quiet, 0.99))
            rows.setdefault("during p50", []).append(_pct(during, 0.5))
            rows.setdefault("during p99", []).append(_pct(during, 0.99))
    med = {k: statistics.median(v) for k, v in rows.items()}
    spread = {k: f"{min(v):,.1f} to {max(v):,.1f}" for k, v in rows.items()}
    print(f"cascade of one user with {n:,} followers, {options.runs} runs (median, min to max)")
    print(f"  cascade             {med['cascade']:>10,.0f} edges/s   ({spread['cascade']})")
    print(f"  bare: batch deletes {med['bare']:>10,.0f} edges/s   ({spread['bare']})")
    print(f"  cascade / bare      {med['cascade'] / med['bare']:>10.2f}")
    for p in ("p50", "p99"):
        quiet, during = med[f"quiet {p}"], med[f"during {p}"]
        print(
            f"  other writer {p}     quiet {quiet:6.2f} ms, during {during:6.2f} ms "
            f"(x{during / quiet:.2f}; {spread[f'during {p}']} ms)"
        )


if __name__ == "__main__":
    main()
