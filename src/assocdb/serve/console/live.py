"""The overview's live numbers: a ring buffer of samples the server keeps.

A sampler thread (started by the first console request) reads, every
`EVERY` seconds, what this process already gathers: the operations
histogram of the metrics (reads and writes per second, classified by the
wire table's scope; p50 and p99 per operation over the last `WINDOW`
samples, interpolated within the histogram's buckets), the cache's counters
and the journal's depth. `HISTORY` samples are kept (six minutes), which is
what the overview's charts draw. With several workers each keeps its own:
the console shows the worker that answered. The objects and edges per type
(`api.inventory`: a pass over an index per shard) are recounted every
`TOTALS_EVERY` seconds, and only while someone looks at the overview.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any, NamedTuple

from ...api.graph import Graph
from ...api.inventory import TypeTotals, type_totals
from ...client.wire import METHODS
from ...core.errors import AssocdbError
from ..metrics import Metrics

log = logging.getLogger("assocdb.server")

EVERY = 2.0  # seconds between samples
HISTORY = 180  # samples kept: six minutes
WINDOW = 30  # samples the percentiles cover: a minute
TOTALS_EVERY = 30.0  # seconds between recounts of the totals per type

#: operation -> (count, bucket counts by upper bound, cumulative)
Histograms = dict[str, tuple[float, list[tuple[float, float]]]]


class Sample(NamedTuple):
    at: float  # time.time()
    reads: float  # per second
    writes: float
    hit_rate: float | None  # of this interval's lookups; None without lookups or a cache
    cache_bytes: int
    depth: int
    errors: int
    bad: int


class OpLatency(NamedTuple):
    name: str
    per_second: float
    p50_ms: float
    p99_ms: float


class Live:
    """The sampler and its ring buffer."""

    def __init__(self, graph: Graph, metrics: Metrics, every: float = EVERY) -> None:
        self._graph = graph
        self._metrics = metrics
        self.every = every  # seconds between samples (a test may shorten it before start)
        self.samples: deque[Sample] = deque(maxlen=HISTORY)
        self._histograms: deque[tuple[float, Histograms]] = deque(maxlen=WINDOW + 1)
        self._cache: tuple[int, int] | None = None
        self.totals: TypeTotals | None = None
        self.totals_at = 0.0
        self.problem: str | None = None  # why the last sample failed, if it did
        self._viewed = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start sampling (once; later calls do nothing)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="console", daemon=True)
                self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def viewed(self) -> None:
        """Note that someone looks at the overview (totals are recounted only then)."""
        self._viewed = time.monotonic()

    def _run(self) -> None:
        while True:
            try:
                self.sample()
            except Exception:  # the sampler must outlive one bad sample
                log.exception("the console's sampler failed; sampling goes on")
            if self._stop.wait(self.every):
                return

    def sample(self) -> None:
        """Take one sample now (the thread calls this; tests may too)."""
        try:
            self._sample()
            self.problem = None
        except AssocdbError as exc:  # a shard down: the page says so, sampling goes on
            self.problem = f"{type(exc).__name__}: {exc}"

    def _sample(self) -> None:
        now = time.time()
        self._metrics.flush()
        histograms = _histograms(self._metrics)
        previous = self._histograms[-1] if self._histograms else None
        self._histograms.append((now, histograms))
        reads = writes = 0.0
        if previous is not None:
            seconds = max(now - previous[0], 1e-9)
            for name, (count, _) in histograms.items():
                done = count - previous[1].get(name, (0.0, []))[0]
                method = METHODS.get(name)
                if method is not None and method.scope == "write":
                    writes += done / seconds
                else:
                    reads += done / seconds
        stats = self._graph.queue_stats()
        hit_rate, cache_bytes = self._cache_numbers()
        self.samples.append(
            Sample(now, reads, writes, hit_rate, cache_bytes, stats.depth, stats.errors, stats.bad)
        )
        now_m = time.monotonic()
        due = self.totals is None or now_m - self.totals_at >= TOTALS_EVERY
        if due and now_m - self._viewed < TOTALS_EVERY:  # a pass over indexes: only if looked at
            self.totals = type_totals(self._graph.engine)
            self.totals_at = now_m

    def _cache_numbers(self) -> tuple[float | None, int]:
        stats = self._graph.cache_stats()
        if stats is None:
            return None, 0
        before, self._cache = self._cache, (stats.hits, stats.misses)
        if before is None:
            return None, stats.bytes
        hits, misses = stats.hits - before[0], stats.misses - before[1]
        return (hits / (hits + misses) if hits + misses else None), stats.bytes

    def latencies(self) -> list[OpLatency]:
        """p50 and p99 per operation over the window, busiest first."""
        if len(self._histograms) < 2:
            return []
        (first, old), (last, new) = self._histograms[0], self._histograms[-1]
        seconds = max(last - first, 1e-9)
        rows = []
        for name, (count, buckets) in new.items():
            old_count, old_buckets = old.get(name, (0.0, []))
            done = count - old_count
            if done <= 0:
                continue
            before = dict(old_buckets)
            window = [(bound, n - before.get(bound, 0.0)) for bound, n in buckets]
            rows.append(
                OpLatency(
                    name,
                    done / seconds,
                    _quantile(window, 0.50) * 1000,
                    _quantile(window, 0.99) * 1000,
                )
            )
        return sorted(rows, key=lambda row: -row.per_second)


def _histograms(metrics: Metrics) -> Histograms:
    """Every operation's count and cumulative buckets, read from the histogram."""
    found: Histograms = {}
    for family in metrics.operations.collect():
        for sample in family.samples:
            if not sample.name.endswith("_bucket"):
                continue
            name = sample.labels["operation"]
            bound = float(sample.labels["le"])
            count, buckets = found.get(name, (0.0, []))
            buckets.append((bound, sample.value))
            if bound == float("inf"):
                count = sample.value
            found[name] = (count, buckets)
    return found


def _quantile(buckets: list[tuple[float, float]], q: float) -> float:
    """The `q` quantile of cumulative `(upper bound, count)` buckets, interpolated."""
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return 0.0
    target = q * total
    low, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= target:
            if bound == float("inf"):
                return low
            inside = count - below
            return low + (bound - low) * ((target - below) / inside if inside else 1.0)
        low, below = bound, count
    return low


def chart(values: list[float | None], width: int = 240, height: int = 48) -> dict[str, Any]:
    """An SVG polyline's points for `values` (oldest first) spread over the box's width
    and scaled to its height, with the largest value for the chart's label; a None
    (no lookups in that interval) is drawn as 0."""
    shown = [v or 0.0 for v in values]
    top = max(shown, default=0.0)
    scale = (height - 4) / top if top > 0 else 0.0
    step = width / max(len(shown) - 1, 1)
    points = " ".join(f"{i * step:.1f},{height - 2 - v * scale:.1f}" for i, v in enumerate(shown))
    return {
        "points": points if len(shown) > 1 else "",
        "top": top,
        "width": width,
        "height": height,
    }


def span(samples: list[Sample]) -> str:
    """How long the samples cover, for people: "40 s", "6 min"."""
    seconds = samples[-1].at - samples[0].at if len(samples) > 1 else 0.0
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
