"""Latency statistics: exact percentiles per operation, and the reference's buckets.

The reference (`LatencyStats`) counts latencies in fixed buckets: 0.1 ms
wide below 1 ms, then 1 ms, 100 ms and 1 s wide, and reports a percentile
as the bucket it falls in. Every in-process assocdb read falls in the first
bucket, [0, 0.1] ms, so the port keeps every sample (8 bytes each) and
reports exact percentiles in microseconds; `reference_bucket` renders a
percentile the reference's way when asked.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass

SUB_MS_BUCKETS, MS_BUCKETS, HUNDRED_MS_BUCKETS, SEC_BUCKETS = 10, 99, 9, 9
NUM_BUCKETS = SUB_MS_BUCKETS + MS_BUCKETS + HUNDRED_MS_BUCKETS + SEC_BUCKETS + 1


class Recorder:
    """One thread's latencies (ns) per operation, plus its error counts."""

    def __init__(self) -> None:
        self.samples: dict[str, array[int]] = {}
        self.errors: dict[str, int] = {}

    def record(self, kind: str, ns: int) -> None:
        samples = self.samples.get(kind)
        if samples is None:
            samples = self.samples[kind] = array("q")
        samples.append(ns)

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def merge(self, other: Recorder) -> None:
        for kind, samples in other.samples.items():
            self.samples.setdefault(kind, array("q")).extend(samples)
        for kind, n in other.errors.items():
            self.errors[kind] = self.errors.get(kind, 0) + n


@dataclass(frozen=True)
class Summary:
    """Latency of one operation, in microseconds."""

    count: int
    p50: float
    p95: float
    p99: float
    max: float
    mean: float
    total_s: float


def summarize(samples: array[int]) -> Summary:
    ordered = sorted(samples)
    n = len(ordered)

    def pct(p: float) -> float:
        # Nearest rank: the smallest sample with at least p% of samples <= it.
        return ordered[max(0, math.ceil(p / 100 * n) - 1)] / 1000

    total = sum(ordered)
    return Summary(n, pct(50), pct(95), pct(99), ordered[-1] / 1000, total / n / 1000, total / 1e9)


def latency_to_bucket(micros: int) -> int:
    """The reference's bucket for a latency in microseconds."""
    ms = micros // 1000
    if ms == 0:
        return micros // 100
    if ms < 100:
        return SUB_MS_BUCKETS + ms - 1
    if ms < 1000:
        return SUB_MS_BUCKETS + MS_BUCKETS + ms // 100 - 1
    if ms < 10000:
        return SUB_MS_BUCKETS + MS_BUCKETS + HUNDRED_MS_BUCKETS + ms // 1000 - 1
    return NUM_BUCKETS - 1


def bucket_bounds(bucket: int) -> tuple[int, int]:
    """[low, high) of a reference bucket, in microseconds."""
    if bucket < SUB_MS_BUCKETS:
        return bucket * 100, (bucket + 1) * 100
    if bucket < SUB_MS_BUCKETS + MS_BUCKETS:
        return (bucket - SUB_MS_BUCKETS + 1) * 1000, (bucket - SUB_MS_BUCKETS + 2) * 1000
    if bucket < SUB_MS_BUCKETS + MS_BUCKETS + HUNDRED_MS_BUCKETS:
        h = bucket - SUB_MS_BUCKETS - MS_BUCKETS + 1
        return h * 100_000, (h + 1) * 100_000
    if bucket < NUM_BUCKETS - 1:
        s = bucket - SUB_MS_BUCKETS - MS_BUCKETS - HUNDRED_MS_BUCKETS + 1
        return s * 1_000_000, (s + 1) * 1_000_000
    return (SEC_BUCKETS + 1) * 1_000_000, 100_000_000


def reference_bucket(samples: array[int], percentile: float) -> str:
    """A percentile as the reference prints it: `[low,high]` of its bucket, in ms."""
    counts = [0] * NUM_BUCKETS
    for ns in samples:
        counts[latency_to_bucket(ns // 1000)] += 1
    needed = int(percentile / 100 * len(samples))
    running = 0
    for bucket, c in enumerate(counts):
        running += c
        if needed <= running:
            low, high = bucket_bounds(bucket)
            return f"[{low / 1000:g},{high / 1000:g}]"
    return "[?]"
