"""The overview's sampler and its pure helpers (`serve/console/live.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

import assocdb
from assocdb.serve.console.live import Live, _quantile, chart, span
from assocdb.serve.metrics import Metrics


def test_quantiles_interpolate_within_cumulative_buckets() -> None:
    buckets = [(0.001, 50.0), (0.01, 90.0), (0.1, 100.0), (float("inf"), 100.0)]
    assert _quantile(buckets, 0.5) == pytest.approx(0.001)
    assert _quantile(buckets, 0.7) == pytest.approx(0.001 + 0.009 * 0.5)
    assert _quantile(buckets, 0.99) == pytest.approx(0.01 + 0.09 * 0.9)
    assert _quantile([(0.1, 0.0), (float("inf"), 0.0)], 0.5) == 0.0
    assert _quantile([(0.1, 0.0), (float("inf"), 4.0)], 0.5) == 0.1  # beyond the last bound


def test_a_chart_spans_its_box_and_scales_to_its_largest_value() -> None:
    drawn = chart([0.0, None, 5.0, 10.0], width=30, height=24)
    points = [tuple(map(float, p.split(","))) for p in drawn["points"].split()]
    assert [x for x, _ in points] == [0.0, 10.0, 20.0, 30.0]
    assert [y for _, y in points] == [22.0, 22.0, 12.0, 2.0]
    assert drawn["top"] == 10.0
    assert chart([1.0])["points"] == ""  # one sample draws no line


def test_samples_count_reads_and_writes_per_second(tmp_path: Path) -> None:
    with assocdb.open(tmp_path / "g", shards=2) as g:
        g.define_assoc("follows")
        metrics = Metrics(g)
        g.assoc_add(1, "follows", 2)
        live = Live(g, metrics)
        try:
            live.sample()
            for n in range(30):
                metrics.operation_times.add(("assoc_page",), 0.0004)
                if n % 3 == 0:
                    metrics.operation_times.add(("assoc_add",), 0.002)
            live.sample()
            first, second = live.samples
            seconds = second.at - first.at
            assert second.reads * seconds == pytest.approx(30)
            assert second.writes * seconds == pytest.approx(10)
            (page, add) = sorted(live.latencies(), key=lambda op: op.name, reverse=True)
            assert page.name == "assoc_page"
            assert 0.25 < page.p50_ms <= 0.5
            assert add.name == "assoc_add"
            assert 1.0 < add.p99_ms <= 2.5
            # counted at the first sample, kept for TOTALS_EVERY
            assert live.totals is not None
            assert live.totals.edges == {"follows": {"normal": 1}}
            assert span(list(live.samples)).endswith(" s")
        finally:
            live.close()
            metrics.close()
