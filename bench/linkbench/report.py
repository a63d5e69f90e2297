"""Printing results: one block per store, then all stores side by side with ratios."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .config import OPERATIONS
from .runner import LoadResult, RequestResult
from .stats import Summary, reference_bucket, summarize


@dataclass
class StoreRun:
    """Everything measured for one store in one run."""

    name: str
    description: str
    load: LoadResult | None
    result: RequestResult
    hit_rate: float | None
    warmup: int = 0

    def summaries(self) -> dict[str, Summary]:
        samples = self.result.recorder.samples
        return {op: summarize(samples[op]) for op in OPERATIONS if samples.get(op)}

    @property
    def wall_rps(self) -> float:
        executed = self.result.requests + self.warmup * self.result.threads
        return executed / self.result.wall_seconds

    @property
    def store_rps(self) -> float:
        """Requests per second of store time (each thread's calls back to back)."""
        busy = sum(s.total_s for s in self.summaries().values())
        return self.result.requests * self.result.threads / busy if busy else 0.0


def _hit(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.1%}"


def store_block(run: StoreRun, reference: bool = False) -> str:
    """The per-operation latency table of one store (µs)."""
    lines = [run.description]
    if run.load is not None:
        ld = run.load
        lines.append(
            f"  load: {ld.links:,} links in {ld.link_seconds:.1f} s"
            f" ({ld.links / max(ld.link_seconds, 1e-9):,.0f}/s),"
            f" {ld.nodes:,} nodes in {ld.node_seconds:.1f} s"
            f" ({ld.nodes / max(ld.node_seconds, 1e-9):,.0f}/s)"
        )
    lines.append(
        f"  {'operation':<14}{'count':>9}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>10}{'mean':>9}"
        + ("   reference buckets p50 / p99 (ms)" if reference else "")
    )
    samples = run.result.recorder.samples
    for op, s in run.summaries().items():
        line = (
            f"  {op:<14}{s.count:>9,}{s.p50:>9.1f}{s.p95:>9.1f}{s.p99:>9.1f}"
            f"{s.max:>10.1f}{s.mean:>9.1f}"
        )
        if reference:
            line += f"   {reference_bucket(samples[op], 50)} / {reference_bucket(samples[op], 99)}"
        lines.append(line)
    errors = run.result.recorder.errors
    lines.append(
        f"  requests/s: {run.wall_rps:,.0f} wall clock (with the Python generator),"
        f" {run.store_rps:,.0f} in store time; cache hit rate {_hit(run.hit_rate)};"
        f" errors {sum(errors.values())}; history queries {run.result.history_queries}"
    )
    return "\n".join(lines)


def ratio_pairs(runs: Sequence[StoreRun]) -> list[tuple[int, int]]:
    """(subject, baseline) index pairs: every assocdb store against every bare store.

    Without that split (say, two bare stores) every store is compared with the last.
    """
    subjects = [i for i, r in enumerate(runs) if not r.name.startswith("bare-")]
    baselines = [i for i, r in enumerate(runs) if r.name.startswith("bare-")]
    if subjects and baselines:
        return [(a, b) for a in subjects for b in baselines]
    return [(i, len(runs) - 1) for i in range(len(runs) - 1)]


def side_by_side(runs: Sequence[StoreRun]) -> str:
    """p50 / p99 / mean (µs) per operation for every store, and ratios subject ÷ baseline."""
    if not runs:
        return ""
    sums = [r.summaries() for r in runs]
    pairs = ratio_pairs(runs)
    width = max(22, *(len(r.name) + 3 for r in runs))
    rwidth = max(22, *(len(runs[a].name) + len(runs[b].name) + 4 for a, b in pairs), 0)
    head = f"{'':<14}" + "".join(f"{r.name:>{width}}" for r in runs)
    head += "".join(f"{runs[a].name + ' ÷ ' + runs[b].name:>{rwidth}}" for a, b in pairs)
    lines = [
        "side by side, µs: p50 / p99 / mean. In the ratio columns, latency < 1 and"
        " requests/s > 1 mean the first store is faster.",
        head,
    ]
    for op in OPERATIONS:
        if not all(op in s for s in sums):
            continue
        row = f"{op:<14}"
        for s in sums:
            x = s[op]
            row += f"{f'{x.p50:.0f} / {x.p99:.0f} / {x.mean:.0f}':>{width}}"
        for a, b in pairs:
            x, y = sums[a][op], sums[b][op]
            cell = f"{x.p50 / y.p50:.2f} / {x.p99 / y.p99:.2f} / {x.mean / y.mean:.2f}"
            row += f"{cell:>{rwidth}}"
        lines.append(row)
    rps = f"{'requests/s':<14}" + "".join(f"{f'{r.wall_rps:,.0f}':>{width}}" for r in runs)
    rps += "".join(f"{runs[a].wall_rps / runs[b].wall_rps:>{rwidth}.2f}" for a, b in pairs)
    store = f"{'(store time)':<14}" + "".join(f"{f'{r.store_rps:,.0f}':>{width}}" for r in runs)
    store += "".join(f"{runs[a].store_rps / runs[b].store_rps:>{rwidth}.2f}" for a, b in pairs)
    hits = f"{'cache hits':<14}" + "".join(f"{_hit(r.hit_rate):>{width}}" for r in runs)
    lines += [rps, store, hits]
    return "\n".join(lines)
