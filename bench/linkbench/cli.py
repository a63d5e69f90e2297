"""`python -m bench linkbench`: load, run the requests, print the tables.

Examples:

    python -m bench linkbench                          # assocdb vs bare SQLite, preset "small"
    python -m bench linkbench --stores assocdb,sqlite,mariadb --requests 200000
    python -m bench linkbench --diff assocdb,sqlite --requests 100000
    python -m bench linkbench --no-quirks --threads 2 --rate 2000

Every store gets the same generated load and the same request streams
(same seeds), one store after the other, in a fresh temporary directory.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .config import Workload
from .differential import run_differential
from .load import generate_links, generate_nodes
from .report import StoreRun, side_by_side, store_block
from .requests import Shared
from .runner import run_load, run_requests
from .stores import FACTORIES, StoreContext, StoreUnavailable, open_store

#: Scales that fit this 2-core machine; see README.md for why not the reference's.
PRESETS = {
    "tiny": {"maxid1": 1_001, "requests": 20_000},
    "small": {"maxid1": 100_001, "requests": 200_000},
    "medium": {"maxid1": 1_000_001, "requests": 500_000},
    "full": {"maxid1": 10_000_001, "requests": 10_000_000},  # the reference's; hours here
}


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench linkbench",
        description="LinkBench's workload against assocdb and the bare LinkBench schema.",
    )
    p.add_argument("--preset", choices=PRESETS, default="small")
    p.add_argument("--stores", default="assocdb,sqlite", help=f"of {', '.join(FACTORIES)}")
    p.add_argument("--maxid1", type=int, help="ids 1 .. maxid1-1 (default: the preset's)")
    p.add_argument("--requests", type=int, help="recorded requests per store, all threads")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=2_000, help="unrecorded requests per thread")
    p.add_argument("--seed", type=int, default=1, help="request_random_seed")
    p.add_argument("--load-seed", type=int, default=1, help="load_random_seed")
    p.add_argument(
        "--quirks",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="reproduce the reference's quirks (default) or fix them",
    )
    p.add_argument("--rate", type=float, default=0.0, help="open loop: requests/s in all")
    p.add_argument("--diff", metavar="A,B", help="differential mode on two stores")
    p.add_argument("--mysql-url", default=os.environ.get("ASSOCDB_TEST_MYSQL_URL"))
    p.add_argument("--postgres-url", default=os.environ.get("ASSOCDB_TEST_POSTGRES_URL"))
    p.add_argument("--myrocks-url", default=os.environ.get("ASSOCDB_TEST_MYROCKS_URL"))
    p.add_argument("--dir", type=Path, help="where stores keep their files (default: a temp dir)")
    p.add_argument("--plot", type=Path, metavar="FILE.png", help="also draw the results as a PNG")
    p.add_argument(
        "--reference-buckets",
        action="store_true",
        help="also print percentiles as the reference's latency buckets",
    )
    args = p.parse_args(argv)
    preset = PRESETS[args.preset]
    args.maxid1 = args.maxid1 or preset["maxid1"]
    args.requests = args.requests or preset["requests"]
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    workload = Workload(maxid1=args.maxid1, quirks=args.quirks)
    root = args.dir or Path(tempfile.mkdtemp(prefix="linkbench-"))
    try:
        _run(args, workload, root)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


def _run(args: argparse.Namespace, workload: Workload, root: Path) -> None:
    started = time.perf_counter()
    shared = Shared(workload)
    ctx = StoreContext(
        root,
        tuple(shared.id2s.link_types()),
        args.mysql_url,
        postgres_url=args.postgres_url,
        myrocks_url=args.myrocks_url,
    )
    names = (args.diff or args.stores).split(",")
    print(
        f"LinkBench (Python port) mode={workload.mode()} maxid1={workload.maxid1:,}"
        f" requests={args.requests:,} threads={args.threads} warmup={args.warmup}/thread"
        f" seed={args.seed} load_seed={args.load_seed}"
        + (f" rate={args.rate:g}/s (open loop)" if args.rate else " (closed loop)")
    )
    t = time.perf_counter()
    links = list(generate_links(workload, args.load_seed))
    nodes = list(generate_nodes(workload, args.load_seed))
    print(
        f"generated the load: {len(links):,} links, {len(nodes):,} nodes"
        f" in {time.perf_counter() - t:.1f} s"
    )
    # The load stays in memory for the next store: move its millions of
    # objects out of the collector's sight, or full collections triggered by
    # the stores' allocations would stall requests for 100+ ms.
    gc.collect()
    gc.freeze()
    stores = []
    for name in names:
        try:
            stores.append(open_store(name, ctx))
        except StoreUnavailable as exc:
            print(f"skipping {name}: {exc}")
    if args.diff:
        _diff(args, shared, stores, links, nodes)
        return
    runs = []
    for store in stores:
        try:
            load = run_load(store, links, nodes)
            if hasattr(store, "disk_bytes"):  # server stores: what the load takes on disk
                print(f"{store.name}: {store.disk_bytes():,} bytes on disk after the load")
            gc.collect()
            result = run_requests(
                store,
                shared,
                requests=args.requests,
                threads=args.threads,
                seed=args.seed,
                warmup=args.warmup,
                rate=args.rate,
            )
            run = StoreRun(
                store.name, store.describe(), load, result, store.cache_hit_rate(), args.warmup
            )
        finally:
            store.close()
        runs.append(run)
        print()
        print(store_block(run, args.reference_buckets))
        for error in result.errors[:5]:
            print(f"  error: {error}")
    if len(runs) > 1:
        print()
        print(side_by_side(runs))
    if args.plot and runs:
        from .plot import plot

        title = (
            f"LinkBench (Python port), {workload.mode()}, maxid1={workload.maxid1:,},"
            f" {args.requests:,} requests, {args.threads} requester(s)"
        )
        plot(runs, title, args.plot)
        print(f"plot: {args.plot}")
    print(f"\n(total {time.perf_counter() - started:.0f} s)")


def _diff(args: argparse.Namespace, shared: Shared, stores: list, links: list, nodes: list) -> None:  # type: ignore[type-arg]
    if len(stores) != 2:
        sys.exit("--diff needs two stores that can run here, e.g. --diff assocdb,sqlite")
    a, b = stores
    try:
        for store in stores:
            run_load(store, links, nodes)
        t = time.perf_counter()
        result = run_differential(a, b, shared, operations=args.requests, seed=args.seed)
        print(
            f"differential {a.name} vs {b.name}: {result.operations:,} operations,"
            f" {result.checks:,} comparisons, {sum(result.by_kind.values())} disagreements"
            f" in {time.perf_counter() - t:.0f} s"
        )
        for kind, n in result.by_kind.items():
            print(f"  {kind}: {n}")
        for d in result.disagreements:
            print(d)
        if result.by_kind:
            sys.exit(1)
    finally:
        for store in stores:
            store.close()
