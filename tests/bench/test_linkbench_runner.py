"""The LinkBench runner, latency statistics and report."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest

from bench.linkbench.cli import parse
from bench.linkbench.config import DEFAULT_NODE_TYPE, OPERATIONS, Workload
from bench.linkbench.load import LoadLink, LoadNode
from bench.linkbench.report import StoreRun, side_by_side, store_block
from bench.linkbench.requests import Shared
from bench.linkbench.runner import run_load, run_requests
from bench.linkbench.stats import bucket_bounds, latency_to_bucket, reference_bucket, summarize
from bench.linkbench.stores import StoreContext, StoreUnavailable, open_store


def test_summary_percentiles_are_nearest_rank() -> None:
    s = summarize(array("q", [i * 1000 for i in range(1, 101)]))  # 1..100 µs
    assert (s.count, s.p50, s.p95, s.p99, s.max) == (100, 50.0, 95.0, 99.0, 100.0)
    assert s.mean == pytest.approx(50.5)


@pytest.mark.parametrize(
    "micros",
    [0, 99, 100, 999, 1000, 1999, 99_999, 100_000, 999_999, 1_000_000, 9_999_999, 10_000_000],
)
def test_reference_buckets_contain_their_latencies(micros: int) -> None:
    low, high = bucket_bounds(latency_to_bucket(micros))
    assert low <= micros < high or micros >= 10_000_000


def test_reference_bucket_strings() -> None:
    assert reference_bucket(array("q", [50_000] * 10), 50) == "[0,0.1]"
    assert reference_bucket(array("q", [2_500_000] * 10), 99) == "[2,3]"


def _small_store(name: str, tmp_path: Path, workload: Workload):  # type: ignore[no-untyped-def]
    shared = Shared(workload)
    store = open_store(name, StoreContext(tmp_path, tuple(shared.id2s.link_types())))
    links = [
        LoadLink(i, t, i + j, 1000 + j, b"x")
        for i in range(2, 300)
        for t in shared.id2s.link_types()
        for j in range(3)
    ]
    nodes = [LoadNode(i, DEFAULT_NODE_TYPE, 1, 1, b"n") for i in range(1, workload.maxid1)]
    return shared, store, run_load(store, links, nodes)


@pytest.mark.parametrize("name", ["assocdb", "sqlite"])
def test_closed_loop_records_every_request_but_the_warmup(tmp_path: Path, name: str) -> None:
    shared, store, load = _small_store(name, tmp_path, Workload(maxid1=301))
    try:
        assert (load.links, load.nodes) == (298 * 2 * 3, 300)
        result = run_requests(store, shared, requests=1_001, threads=2, seed=3, warmup=50)
    finally:
        store.close()
    samples = result.recorder.samples
    assert sum(len(v) for v in samples.values()) == 1_001
    assert result.recorder.errors == {}
    assert set(samples) <= set(OPERATIONS)
    assert len(samples) >= 8
    run = StoreRun(name, "test", load, result, None, warmup=50)
    assert run.wall_rps > 0
    assert run.store_rps > run.wall_rps * 0.5
    block = store_block(run, reference=True)
    assert "get_link_list" in block
    assert "cache hit rate n/a" in block


def test_open_loop_paces_requests_and_counts_queueing(tmp_path: Path) -> None:
    workload = Workload(maxid1=301, quirks=False)
    shared, store, _ = _small_store("sqlite", tmp_path, workload)
    try:
        result = run_requests(store, shared, requests=300, threads=1, seed=3, rate=1_500)
    finally:
        store.close()
    assert 0.1 < result.wall_seconds < 2.0  # ~0.2 s at 1,500 requests/s
    assert sum(len(v) for v in result.recorder.samples.values()) == 300


def test_side_by_side_has_ratios(tmp_path: Path) -> None:
    runs = []
    for name in ("assocdb", "sqlite"):
        shared, store, load = _small_store(name, tmp_path / name, Workload(maxid1=301))
        try:
            result = run_requests(store, shared, requests=400, seed=5)
        finally:
            store.close()
        runs.append(StoreRun(name, name, load, result, None))
    table = side_by_side(runs)
    assert "assocdb ÷ sqlite" in table.replace("bare-", "")
    assert "requests/s" in table
    assert "cache hits" in table
    assert sum(line.startswith("get_link_list") for line in table.splitlines()) == 1


def test_plot_draws_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from bench.linkbench.plot import plot

    shared, store, load = _small_store("sqlite", tmp_path / "s", Workload(maxid1=301))
    try:
        result = run_requests(store, shared, requests=200, seed=5)
    finally:
        store.close()
    run = StoreRun("sqlite", "sqlite", load, result, None)
    plot([run, run], "test", tmp_path / "out.png")
    png = (tmp_path / "out.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    assert len(png) > 10_000


def test_stores_that_cannot_run_here_say_so(tmp_path: Path) -> None:
    ctx = StoreContext(tmp_path, (1,))
    for name in ("assocdb-mariadb", "nosuch"):
        with pytest.raises(StoreUnavailable):
            open_store(name, ctx)


def test_cli_presets_and_overrides() -> None:
    args = parse([])
    assert (args.maxid1, args.requests, args.quirks, args.stores) == (
        100_001,
        200_000,
        True,
        "assocdb,sqlite",
    )
    args = parse(["--preset", "tiny", "--requests", "7", "--no-quirks"])
    assert (args.maxid1, args.requests, args.quirks) == (1_001, 7, False)
