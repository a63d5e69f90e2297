"""Timing helpers: interleaved rounds and medians, to survive a noisy 2-core VM."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def per_call_us(fn: Callable[[int], object], calls: int) -> float:
    """µs per call of `fn(i)` for i in range(calls)."""
    start = time.perf_counter()
    for i in range(calls):
        fn(i)
    return (time.perf_counter() - start) / calls * 1e6


def compare(
    subject: Callable[[int], object],
    baseline: Callable[[int], object],
    calls: int = 2000,
    rounds: int = 7,
) -> tuple[float, float]:
    """Median µs per call of subject and baseline, measured in alternating rounds."""
    per_call_us(subject, calls // 10)  # warm up both
    per_call_us(baseline, calls // 10)
    subject_us, baseline_us = [], []
    for _ in range(rounds):
        subject_us.append(per_call_us(subject, calls))
        baseline_us.append(per_call_us(baseline, calls))
    return statistics.median(subject_us), statistics.median(baseline_us)


def row(label: str, value: str, baseline: str, ratio: float, target: str) -> str:
    return f"{label:<44} {value:>14} {baseline:>14} {ratio:>7.2f}x  {target}"


HEADER = f"{'':<44} {'assocdb':>14} {'baseline':>14} {'ratio':>8}  target"
