"""The load phase and the request phase against one store.

Request phase: `threads` requesters, each with its own `java.util.Random`
seeded as the reference seeds them (`sha1prng.thread_seeds`) and its own
generator over the shared workload. Closed loop by default: a requester
issues its next request when the previous one answers. With a `rate`
(requests per second, over all requesters) it is open loop: each requester
waits for exponentially distributed gaps as the reference's `Timer` does,
and a latency is measured from the request's *intended* start, so time
spent queued behind a slow answer is counted (in quirks mode, from its
actual start, as the reference does). The first `warmup` requests of each
requester are run but not recorded. Only the store call is timed; the
generator's own time (~15-20 µs a request in Python) is outside every
latency, but inside the wall-clock requests/s.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from .config import GET_LINKS_LIST, Workload
from .execute import DISPATCH
from .load import LoadLink, LoadNode
from .requests import RequestGenerator, Shared, requester_rng
from .sha1prng import thread_seeds
from .stats import Recorder
from .stores.base import Store


@dataclass
class LoadResult:
    links: int
    nodes: int
    link_seconds: float
    node_seconds: float


@dataclass
class RequestResult:
    requests: int
    threads: int
    wall_seconds: float
    recorder: Recorder
    history_queries: int = 0
    errors: list[str] = field(default_factory=list)


def run_load(store: Store, links: Sequence[LoadLink], nodes: Sequence[LoadNode]) -> LoadResult:
    """Bulk-load pre-generated links and nodes; times each part."""
    start = time.perf_counter()
    n_links = store.load_links(links)
    mid = time.perf_counter()
    n_nodes = store.load_nodes(nodes)
    end = time.perf_counter()
    return LoadResult(n_links, n_nodes, mid - start, end - mid)


def run_requests(
    store: Store,
    shared: Shared,
    *,
    requests: int,
    threads: int = 1,
    seed: int = 1,
    warmup: int = 0,
    rate: float = 0.0,
) -> RequestResult:
    """`requests` recorded requests in all, split over `threads` requesters."""
    workload = shared.workload
    seeds = thread_seeds(seed, threads)
    per_thread = [
        requests // threads + (1 if i < requests % threads else 0) for i in range(threads)
    ]
    recorders = [Recorder() for _ in range(threads)]
    history = [0] * threads
    errors: list[str] = []
    barrier = threading.Barrier(threads + 1)

    def requester(i: int) -> None:
        rng = requester_rng(seeds[i])
        gen = RequestGenerator(shared, rng)
        rec = recorders[i]
        per_ns = rate / threads / 1e9 if rate > 0 else 0.0
        barrier.wait()
        intended = time.perf_counter_ns()
        total = warmup + per_thread[i]
        for n in range(total):
            if per_ns:
                intended += round(-math.log(rng.next_double()) / per_ns)
                _wait_until(intended)
            op = gen.next()
            call = DISPATCH[op.kind]
            start = time.perf_counter_ns()
            try:
                answer = call(store, op)
            except Exception as exc:  # a failed request is counted, as the reference does
                rec.error(op.kind)
                if len(errors) < 20:
                    errors.append(f"{op.kind}: {type(exc).__name__}: {exc}")
                continue
            end = time.perf_counter_ns()
            if per_ns and not workload.quirks:
                start = intended  # open loop: count the time spent waiting to start
            if op.kind == GET_LINKS_LIST:
                last = store.last_time(answer) if answer else None
                gen.observe_list(op, len(answer), last)
                if op.history >= 0:
                    history[i] += 1
            if n >= warmup:
                rec.record(op.kind, end - start)

    workers = [threading.Thread(target=requester, args=(i,), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    for w in workers:
        w.join()
    wall = time.perf_counter() - start
    merged = Recorder()
    for rec in recorders:
        merged.merge(rec)
    return RequestResult(requests, threads, wall, merged, sum(history), errors)


def _wait_until(ns: int) -> None:
    while True:
        delay = ns - time.perf_counter_ns()
        if delay <= 0:
            return
        time.sleep(delay / 1e9)


__all__ = ["LoadResult", "RequestResult", "Workload", "run_load", "run_requests"]
