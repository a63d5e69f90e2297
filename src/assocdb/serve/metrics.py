"""Prometheus metrics of a server: requests, library operations, statements, the journal.

Several worker processes (`assocdb serve --workers N`) share one view
through prometheus-client's multiprocess mode when `PROMETHEUS_MULTIPROC_DIR`
is set (the serve command sets it); the journal's numbers are read at scrape
time from the journal, which every worker shares anyway.

Nothing is observed into a Prometheus metric on the hot path: a metric's
observation goes through a memory-mapped file in multiprocess mode, and one
per read of a batch or per SQL statement cost 7-15% of a worker. Timings and
counts are gathered in process (`Tally`: a lock, a bisect and two additions)
and added to the metrics in bulk once a second and before every scrape. A
batch counts its reads per operation kind, each at the batch's mean time per
read; it does not time every read.
"""

from __future__ import annotations

import os
import threading
from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from ..api.engine import ReplicaHealth
from ..api.graph import Graph

_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
)


class Metrics:
    """The server's metrics, registered in their own registry."""

    def __init__(self, graph: Graph) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Histogram(
            "assocdb_request_seconds",
            "HTTP request latency by API method.",
            ["method"],
            registry=r,
            buckets=_BUCKETS,
        )
        self.responses = Counter(
            "assocdb_responses",
            "HTTP responses by API method and status.",
            ["method", "status"],
            registry=r,
        )
        self.operations = Histogram(
            "assocdb_operation_seconds",
            "Library operation latency (in the worker thread).",
            ["operation"],
            registry=r,
            buckets=_BUCKETS,
        )
        self.errors = Counter(
            "assocdb_errors", "Errors answered, by error code.", ["code"], registry=r
        )
        self.statements = Histogram(
            "assocdb_statement_seconds",
            "Backend SQL statement latency by shard.",
            ["shard"],
            registry=r,
            buckets=_BUCKETS,
        )
        self.request_times = Tally(self.requests)
        self.operation_times = Tally(self.operations)
        self.statement_times = Tally(self.statements)
        self.response_counts = Tally(self.responses)
        self._tallies = (
            self.request_times,
            self.operation_times,
            self.statement_times,
            self.response_counts,
        )
        statements = self.statement_times
        graph.trace(lambda shard, sql, seconds: statements.add((str(shard),), seconds))
        self._journal = _JournalCollector(graph)
        self._stop = threading.Event()
        self._flusher = threading.Thread(target=self._flush_often, name="metrics", daemon=True)
        self._flusher.start()

    def flush(self) -> None:
        """Add what was gathered in process to the metrics."""
        for tally in self._tallies:
            tally.flush()

    def _flush_often(self) -> None:
        while not self._stop.wait(FLUSH_SECONDS):
            self.flush()

    def close(self) -> None:
        self._stop.set()
        self._flusher.join()
        self.flush()

    def render(self) -> bytes:
        """The text exposition format, for GET /metrics."""
        self.flush()
        registry = self.registry
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            registry = CollectorRegistry()
            MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        registry.register(self._journal)
        try:
            return generate_latest(registry)
        finally:
            registry.unregister(self._journal)


FLUSH_SECONDS = 1.0


class Tally:
    """Observations of one histogram (or increments of one counter) by label values,
    gathered in process and added to the metric in bulk by `flush`."""

    def __init__(self, metric: Histogram | Counter) -> None:
        self._metric = metric
        self._bounds: list[float] = list(getattr(metric, "_upper_bounds", ()))
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, ...], list[Any]] = {}

    def add(self, labels: tuple[str, ...], seconds: float, n: int = 1) -> None:
        """`n` observations of `seconds` each (a counter: `n` increments)."""
        with self._lock:
            row = self._pending.get(labels)
            if row is None:
                row = self._pending[labels] = [0.0] + [0] * (len(self._bounds) or 1)
            row[0] += seconds * n
            row[1 + (bisect_left(self._bounds, seconds) if self._bounds else 0)] += n

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        for labels, row in pending.items():
            child: Any = self._metric.labels(*labels)
            if not self._bounds:
                child.inc(row[1])
                continue
            # Histogram.observe, n at a time: its sum and its (non-cumulative) buckets.
            child._sum.inc(row[0])
            for bucket, count in zip(child._buckets, row[1:], strict=True):
                if count:
                    bucket.inc(count)


class _JournalCollector(Collector):
    def __init__(self, graph: Graph) -> None:
        self._graph = graph

    def collect(self) -> Iterator[GaugeMetricFamily]:
        stats = self._graph.queue_stats()
        for name, value, text in (
            ("assocdb_queue_depth", stats.depth, "Journaled jobs not yet fully applied."),
            ("assocdb_queue_errors", stats.errors, "Jobs in the error queue."),
            ("assocdb_queue_bad", stats.bad, "Bad jobs waiting for a person."),
            ("assocdb_queue_running", stats.running, "Long background jobs in progress."),
            ("assocdb_apply_p99_seconds", stats.apply_p99_ms / 1000, "p99 of recent job applies."),
            ("assocdb_shards_down", len(stats.down_shards), "Shards marked down."),
        ):
            yield GaugeMetricFamily(name, text, value=value)
        yield from _member_metrics(self._graph.engine.replica_health())
        cache = self._graph.cache_stats()
        if cache is not None:
            for name, value, text in (
                ("assocdb_cache_hits", cache.hits, "Tier-1 cache hits since start."),
                ("assocdb_cache_misses", cache.misses, "Tier-1 cache misses since start."),
                ("assocdb_cache_hit_ratio", cache.hit_rate, "Tier-1 hits / lookups."),
                ("assocdb_cache_fills", cache.fills, "Cache fills from tier 2 or the shards."),
                ("assocdb_cache_fill_seconds", cache.fill_us / 1e6, "Mean time a fill reads."),
                ("assocdb_cache_stale_fills", cache.stale_fills, "Fills a write overlapped."),
                (
                    "assocdb_cache_lists_admit_after",
                    cache.lists_admit_after,
                    "The miss that fills a list (raised while fills are not paid back).",
                ),
                (
                    "assocdb_cache_hits_per_fill",
                    cache.hits_per_fill,
                    "Hits a recent list fill earned, weighed by rows (fills pay at about 4).",
                ),
                (
                    "assocdb_cache_list_fills_open",
                    int(cache.list_fills_open),
                    "1: a list's miss may fill; 0: fills closed, they did not pay.",
                ),
                (
                    "assocdb_cache_gets_open",
                    int(cache.gets_open),
                    "1: assoc_get asks the cache; 0: its hits did not pay, it reads the shard.",
                ),
                ("assocdb_cache_evictions", cache.evictions, "Tier-1 entries evicted."),
                ("assocdb_cache_bytes", cache.bytes, "Tier-1 memory, bytes."),
                ("assocdb_cache_entries", cache.entries, "Tier-1 entries."),
                ("assocdb_cache_redis_hits", cache.redis_hits, "Tier-2 (Redis) hits."),
                ("assocdb_cache_redis_failures", cache.redis_failures, "Failed Redis calls."),
            ):
                yield GaugeMetricFamily(name, text, value=value)


def _member_metrics(health: ReplicaHealth | None) -> Iterator[GaugeMetricFamily]:
    """Up/down and failures of each member backend of a shard map (none otherwise)."""
    if health is None:
        return
    families = {
        "up": GaugeMetricFamily(
            "assocdb_backend_up", "1 if the backend takes work, 0 if down.", labels=["backend"]
        ),
        "failures": GaugeMetricFamily(
            "assocdb_backend_failures", "Failed calls and probes since start.", labels=["backend"]
        ),
        "downs": GaugeMetricFamily(
            "assocdb_backend_downs", "Times marked down since start.", labels=["backend"]
        ),
    }
    for member in health.members:
        families["up"].add_metric([member.name], float(member.up and not member.drained))
        families["failures"].add_metric([member.name], member.failures)
        families["downs"].add_metric([member.name], member.downs)
    yield from families.values()
    yield GaugeMetricFamily(
        "assocdb_read_failovers",
        "Reads answered by another replica after one failed, since start.",
        value=health.failovers,
    )
    verified = health.last_verify
    if verified is not None:  # `assocdb shards verify` keeps its last run's figures
        differences = GaugeMetricFamily(
            "assocdb_replica_differences",
            "Rows the replicas disagreed about at the last `shards verify`, by table.",
            labels=["table"],
        )
        for table, n in sorted(verified.get("by_table", {}).items()):
            differences.add_metric([table], n)
        differences.add_metric(["all"], verified.get("differences", 0))
        yield differences
        yield GaugeMetricFamily(
            "assocdb_replica_verify_timestamp_seconds",
            "When the last `shards verify` ran (Unix time).",
            value=verified.get("at", 0),
        )
        yield GaugeMetricFamily(
            "assocdb_replica_verify_repaired",
            "1 if the last `shards verify` repaired what it found.",
            value=float(bool(verified.get("repaired"))),
        )
