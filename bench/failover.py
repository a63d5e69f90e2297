"""Failover benchmark (issue 6): reads and writes while one replica fails, in one run.

A graph of 16 shards on three SQLite member directories, two replicas per
shard (`assocdb.open("cluster.toml")`), uncached reads of random follower
lists (`assoc_range(limit=20)`) with one write in ten. Member db2 (a replica
of 2/3 of the shards) goes through four phases:

* healthy;
* *failing*: every statement on db2 fails at once (a refused connection);
* *hanging*: every statement on db2 waits `HANG` seconds and then fails
  (a server that stopped answering, cut off by its query timeout);
* recovered.

Each phase reports reads, failed reads, p50/p99/max read latency and the
reads that failed over; the hanging phase runs twice, with the failure
detector (down after 3 failures, then probed in the background) and without
it (threshold too high to trip), so its effect is measured. The same reads on
one plain SQLite directory (no replicas) are the baseline. After recovery the
queued writes drain and every replica pair is compared row for row.

Run: `python -m bench failover [reads per phase]` (default 2000). The same
drill on real MariaDB servers, stopped with SIGSTOP and SIGKILL under load:
`python -m bench failover --mysql [--outage SECONDS]` (`failover_mysql.py`).
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import assocdb
from assocdb import Graph, Unavailable
from assocdb.storage.shardmap import ShardMapBackend

SHARDS = 16
MEMBERS = ("db1", "db2", "db3")
PEOPLE = 400
FOLLOWS = 30
HANG = 0.1  # seconds a hung statement waits before its timeout
Fault = Callable[[int, str], None]


def write_map(root: Path, threshold: int) -> Path:
    lines = [f"shards = {SHARDS}", ""]
    for name in MEMBERS:
        lines += [f"[backends.{name}]", f'path = "{name}"', "query_timeout = 0.5", ""]
    lines += ["[detector]", f"threshold = {threshold}", "probe_interval = 0.2", ""]
    for shard in range(SHARDS):
        a, b = MEMBERS[shard % 3], MEMBERS[(shard + 1) % 3]
        lines += ["[[placement]]", f'shards = "{shard}"']
        lines += [f'replicas = [{{backend = "{a}"}}, {{backend = "{b}"}}]', ""]
    root.mkdir(parents=True)
    path = root / "cluster.toml"
    path.write_text("\n".join(lines))
    return path


def load(g: Graph) -> None:
    g.define_assoc("follows", inverse="followed_by")
    rnd = random.Random(1)
    edges = [
        (a, "follows", rnd.randrange(1, PEOPLE + 1), n)
        for a in range(1, PEOPLE + 1)
        for n in range(FOLLOWS)
    ]
    g.bulk_load(edges)


def phase(g: Graph, reads: int, seed: int, writes: bool) -> dict[str, float]:
    """Run `reads` reads (and, with `writes`, a write per ten); the phase's figures."""
    rnd = random.Random(seed)
    backend = g.engine.backend
    failovers_before = backend.failovers if isinstance(backend, ShardMapBackend) else 0
    latencies: list[float] = []
    write_latencies: list[float] = [0.0]
    failed = queued = written = 0
    for n in range(reads):
        person = rnd.randrange(1, PEOPLE + 1)
        if writes and n % 10 == 0:
            written += 1
            other = rnd.randrange(1, PEOPLE + 1)  # a write is journaled first: never refused
            start = time.perf_counter()
            queued += g.assoc_add(person, "follows", other).status == "queued"
            write_latencies.append(time.perf_counter() - start)
        start = time.perf_counter()
        try:
            g.assoc_range(person, "followed_by", limit=20)
        except Unavailable:
            failed += 1
        latencies.append(time.perf_counter() - start)
    latencies.sort()
    write_latencies.sort()
    failovers = backend.failovers - failovers_before if isinstance(backend, ShardMapBackend) else 0
    return {
        "failed": failed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(0.99 * len(latencies))] * 1000,
        "max_ms": latencies[-1] * 1000,
        "failovers": failovers,
        "queued": queued,
        "writes": written,
        "write_p50_ms": statistics.median(write_latencies) * 1000,
        "write_p99_ms": write_latencies[int(0.99 * len(write_latencies))] * 1000,
    }


def failing(hang: float) -> Fault:
    def fault(shard: int, sql: str) -> None:
        time.sleep(hang)
        raise sqlite3.OperationalError("injected outage")

    return fault


def run_cluster(
    root: Path, reads: int, threshold: int, label: str
) -> list[tuple[str, dict[str, float]]]:
    g = assocdb.open(write_map(root, threshold), cache=None)
    load(g)
    backend = g.engine.backend
    assert isinstance(backend, ShardMapBackend)
    faults = backend.member("db2").faults  # type: ignore[attr-defined]
    phase(g, reads, 0, writes=False)  # warm up: connections, page cache
    rows = [(f"{label}: healthy", phase(g, reads, 1, writes=True))]
    for name, hang, writes in (
        ("failing, reads", 0.0, False),
        ("hanging, reads", HANG, False),
        ("hanging, reads+writes", HANG, True),
    ):
        fault = failing(hang)
        faults.append(fault)
        rows.append((f"{label}: db2 {name}", phase(g, reads, 2, writes)))
        faults.remove(fault)
        started = time.perf_counter()
        while not all(m.up for m in backend.status()):  # the prober brings db2 back
            time.sleep(0.01)
        up_s = time.perf_counter() - started
        assert g.drain(timeout=120), "the journal did not drain"
        drain_s = time.perf_counter() - started
        print(
            f"{label}, db2 {name}: up again {up_s:.2f} s after the fault was cured, "
            f"queued writes applied after {drain_s:.2f} s"
        )
    rows.append((f"{label}: recovered", phase(g, reads, 3, writes=True)))
    assert g.drain(timeout=120), "the journal did not drain"
    converged = all(
        backend.member(a.backend).export_edges(s, None, 10**7)
        == backend.member(b.backend).export_edges(s, None, 10**7)
        for s, (a, b) in enumerate(backend.map.replicas)
    )
    print(f"{label}: every replica pair holds equal rows: {converged}")
    g.close()
    return rows


def main(args: list[str] | None = None) -> None:
    args = list(args or [])
    if "--mysql" in args:  # the drill on real MariaDB servers: bench/failover_mysql.py
        from . import failover_mysql

        outage = float(args[args.index("--outage") + 1]) if "--outage" in args else 30.0
        failover_mysql.main(outage)
        return
    reads = int(args[0]) if args else 2000
    root = Path(tempfile.mkdtemp(prefix="assocdb-failover-"))
    try:
        plain = assocdb.open(root / "plain", shards=SHARDS, cache=None)
        load(plain)
        phase(plain, reads, 0, writes=False)
        rows = [("bare: one SQLite directory", phase(plain, reads, 1, writes=True))]
        plain.close()
        rows += run_cluster(root / "detector", reads, 3, "detector on")
        rows += run_cluster(root / "nodetector", reads, 10**9, "detector off")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nfailover: {reads} uncached reads per phase (+1 write per 10); db2 hangs {HANG} s")
    print("read latency in ms; w p50/w p99: write (assoc_add, sync) latency in ms")
    heads = ("failed", "p50 ms", "p99 ms", "max ms", "failover", "queued", "w p50", "w p99")
    print(f"{'':<42} " + " ".join(f"{h:>8}" for h in heads))
    for label, r in rows:
        print(
            f"{label:<42} {r['failed']:>8} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} "
            f"{r['max_ms']:>8.1f} {r['failovers']:>8} {r['queued']:>4}/{r['writes']:<3} "
            f"{r['write_p50_ms']:>8.3f} {r['write_p99_ms']:>8.3f}"
        )


if __name__ == "__main__":
    main()
