"""`--plot FILE`: the side-by-side table as a PNG (matplotlib).

Left: p50 and p99 latency per operation, one bar pair per store, log scale.
Right: requests/s per store (store time). The title carries the run's mode,
scale and store descriptions' short names, so a PNG stands on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .config import OPERATIONS
from .report import StoreRun


def plot(runs: Sequence[StoreRun], title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    ops = [op for op in OPERATIONS if any(op in run.summaries() for run in runs)]
    fig, (lat, rps) = plt.subplots(
        1, 2, figsize=(14, 5.5), gridspec_kw={"width_ratios": [4, 1]}, layout="constrained"
    )
    width = 0.8 / len(runs)
    for i, run in enumerate(runs):
        summaries = run.summaries()
        xs = [n + i * width for n in range(len(ops))]
        p50 = [summaries[op].p50 if op in summaries else 0 for op in ops]
        p99 = [summaries[op].p99 if op in summaries else 0 for op in ops]
        bars = lat.bar(xs, p99, width, alpha=0.35, label=f"{run.name} p99")
        lat.bar(xs, p50, width, color=bars.patches[0].get_facecolor()[:3], label=f"{run.name} p50")
    lat.set_xticks([n + 0.4 - width / 2 for n in range(len(ops))], ops, rotation=30, ha="right")
    lat.set_yscale("log")
    lat.set_ylabel("latency, µs (log)")
    lat.legend(fontsize="small", ncols=2)
    lat.grid(axis="y", which="both", alpha=0.3)
    names = [run.name for run in runs]
    rps.bar(names, [run.store_rps for run in runs], color=[f"C{i}" for i in range(len(runs))])
    rps.set_ylabel("requests/s (store time)")
    rps.tick_params(axis="x", rotation=30)
    rps.grid(axis="y", alpha=0.3)
    fig.suptitle(title)
    fig.savefig(path, dpi=110)
    plt.close(fig)
