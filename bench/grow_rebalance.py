"""Rebalance 3 -> 4 MariaDB servers under load (issue 41): `rebalance` with `--to db4`.

Four MariaDB servers of their own (ports 3321-3324, data under
/tmp/assocdb-rebalance-mariadb, started with `tests/support/mariadb_instances.sh`,
never the machine's default server). A graph of 16 shards (one replica each,
or `--replicas 2`) on the first three is bulk-loaded with `--people` people
following 10 others each (every follow also writes its inverse). Reader and
writer threads keep a mixed load on it, each read checked:

* readers ask whether a person follows one of the 10 loaded people
  (`assoc_get`: never missing), count a person's follows (`assoc_count`: never
  below 10 plus their acknowledged new follows) and page the newest 20
  (`assoc_range`); a failed check is a *wrong* answer;
* writers add new follows (`assoc_add`, journaled); each acknowledged one is
  looked up at the end (a missing one is *lost*).

Then db4 joins the map and `rebalance(make_plan(..., to="db4"), parallel=N)`
runs its moves while the load goes on. Reported: reads, wrong answers and
read p50/p99 per phase (before, during, after), the plan, each move's time and
copy time, the whole rebalance's time beside the sum of its moves' copy times,
lost writes, a final count check, and `shards reclaim` of the old copies: the
schemas each server keeps afterwards beside the shards the map places there.

Targets: 0 lost, 0 wrong, read p99 during <= 2x before, rebalance time <= 2x the
sum of the moves' copy times.

Run: `python -m bench grow --rebalance [--people 100000] [--parallel 2] [--replicas 1]
[--steady 20]`.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import assocdb
from assocdb import Graph, Unavailable
from assocdb.storage.mysql import MySQLBackend
from assocdb.storage.mysqlpool import connect_args, driver, parse_url
from assocdb.storage.rebalance import Progress, Step, make_plan, rebalance
from assocdb.storage.reclaim import reclaim, settle_of
from assocdb.storage.shardmap import ShardMapBackend
from assocdb.storage.shardmap_config import BackendConfig, load, save, with_backend

from .failover_mysql import SCRIPT

PORTS = (3321, 3322, 3323, 3324)
MEMBERS = ("db1", "db2", "db3")
SHARDS = 16
FOLLOWS = 10
STEP = 9973  # person a follows (a + k * STEP) % people + 1, k < FOLLOWS: 10 distinct people
DATA = Path("/tmp/assocdb-rebalance-mariadb")


def servers(action: str) -> None:
    env = {**os.environ, "ASSOCDB_MARIADB_DIR": str(DATA)}
    subprocess.run(["bash", str(SCRIPT), action, *map(str, PORTS)], check=True, env=env)


def write_map(root: Path, graph: str, replicas: int) -> Path:
    lines = [f"shards = {SHARDS}", ""]
    for name, port in zip(MEMBERS, PORTS, strict=False):
        lines += [f"[backends.{name}]", f'url = "mysql://root@127.0.0.1:{port}/{graph}"']
        lines += ["connect_timeout = 0.5", "query_timeout = 1.0", ""]
    for shard in range(SHARDS):
        names = [MEMBERS[(shard + n) % 3] for n in range(replicas)]
        listed = ", ".join(f'{{backend = "{name}"}}' for name in names)
        lines += ["[[placement]]", f'shards = "{shard}"', f"replicas = [{listed}]", ""]
    path = root / "cluster.toml"
    path.write_text("\n".join(lines))
    return path


def followed(person: int, k: int, people: int) -> int:
    return (person + k * STEP) % people + 1


@dataclass
class Phase:
    name: str
    reads: list[float] = field(default_factory=list)
    wrong: int = 0
    failed: int = 0
    writes: int = 0
    queued: int = 0
    refused: int = 0


@dataclass
class Load:
    graph: Graph
    people: int
    phase: Phase
    acked: dict[int, list[int]] = field(default_factory=dict)  # person -> new follows acked
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    wrongs: list[str] = field(default_factory=list)

    def write(self, seed: int) -> None:
        rnd = random.Random(seed)
        next_id2 = 1_000_000_000 * (seed + 1)
        while not self.stop.is_set():
            phase, person = self.phase, rnd.randrange(1, self.people + 1)
            next_id2 += 1
            try:
                status = self.graph.assoc_add(person, "follows", next_id2).status
            except Unavailable:
                phase.refused += 1
                continue
            with self.lock:
                self.acked.setdefault(person, []).append(next_id2)
            phase.writes += 1
            phase.queued += status == "queued"

    def read(self, seed: int) -> None:
        rnd = random.Random(seed)
        g = self.graph
        while not self.stop.is_set():
            phase, person = self.phase, rnd.randrange(1, self.people + 1)
            with self.lock:
                floor = FOLLOWS + len(self.acked.get(person, ()))
            kind = rnd.randrange(3)
            start = time.perf_counter()
            try:
                if kind == 0:
                    other = followed(person, rnd.randrange(FOLLOWS), self.people)
                    ok = bool(g.assoc_get(person, "follows", [other]))
                elif kind == 1:
                    ok = g.assoc_count(person, "follows") >= floor
                else:
                    ok = len(g.assoc_range(person, "follows", limit=20)) >= min(20, floor)
            except Unavailable:
                phase.failed += 1
                continue
            phase.reads.append(time.perf_counter() - start)
            if not ok:
                phase.wrong += 1
                self.wrongs.append(f"{phase.name}: read {kind} of person {person}")


def p99(phase: Phase) -> float:
    lat = sorted(phase.reads) or [0.0]
    return lat[int(0.99 * len(lat))] * 1000


def report(phases: list[Phase]) -> None:
    print(f"{'phase':<30} {'reads':>7} {'wrong':>5} {'failed':>6} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'max ms':>7} {'writes':>6} {'queued':>6} {'refused':>7}")  # fmt: skip
    for p in phases:
        lat = sorted(p.reads) or [0.0]
        print(
            f"{p.name:<30} {len(p.reads):>7} {p.wrong:>5} {p.failed:>6} "
            f"{statistics.median(lat) * 1000:>7.2f} {p99(p):>7.2f} {lat[-1] * 1000:>7.1f} "
            f"{p.writes:>6} {p.queued:>6} {p.refused:>7}"
        )


def schemas(port: int, graph: str) -> list[str]:
    """The shard schemas of `graph` on the server at `port`."""
    settings = parse_url(f"mysql://root@127.0.0.1:{port}/{graph}")
    args = connect_args(settings, driver().__name__ == "MySQLdb", 60.0)
    args.pop("database", None)
    args.pop("db", None)
    conn = driver().connect(**args)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES LIKE %s", (f"{graph}\\_s%",))
            return sorted(str(name) for (name,) in cur.fetchall())
    finally:
        conn.close()


def progress_line(p: Progress) -> None:
    if p.step is not None:
        print(f"  move {p.done + 1}/{p.total}: shard {p.step.shard} {p.step.source} -> "
              f"{p.step.target}: {p.copied:,} rows at {p.rows_per_second:,.0f} rows/s; "
              f"ETA {p.eta:.0f} s", flush=True)  # fmt: skip


def results(g: Graph, load_: Load, phases: list[Phase], steps: list[Step], took: float) -> None:
    acked = [(a, b) for a, bs in load_.acked.items() for b in bs]
    lost = [(a, b) for a, b in acked if not g.assoc_get(a, "follows", [b])]
    sample = random.Random(7).sample(range(1, load_.people + 1), min(load_.people, 2000))
    miscounted = [
        a for a in sample if g.assoc_count(a, "follows") != FOLLOWS + len(load_.acked.get(a, ()))
    ]
    counts = g.check_counts()
    copies = sum(s.copy_seconds for s in steps)
    moves = sum(s.seconds for s in steps)
    for s in steps:
        print(f"  shard {s.shard} {s.source}->{s.target}: {s.rows:,} rows, copy "
              f"{s.copy_seconds:.1f} s ({s.rows / max(s.copy_seconds, 1e-9):,.0f} rows/s), "
              f"move {s.seconds:.1f} s")  # fmt: skip
    ratio = p99(phases[1]) / max(p99(phases[0]), 1e-9)
    print(
        f"rebalance: {len(steps)} moves, {sum(s.rows for s in steps):,} rows in "
        f"{took:.1f} s; sum of the moves' copy times {copies:.1f} s: "
        f"{took / max(copies, 1e-9):.2f}x (target <= 2x); sum of the moves' times "
        f"{moves:.1f} s; read p99 during/before {ratio:.2f}x (target <= 2x); "
        f"wrong answers: {sum(p.wrong for p in phases)}; refused writes: "
        f"{sum(p.refused for p in phases)}; acknowledged "
        f"writes {len(acked)}, lost {len(lost)}; follows counts off in a sample of "
        f"{len(sample)}: {len(miscounted)}; check_counts: {len(counts)} mismatches",
        flush=True,
    )


def reclaimed(path: Path, graph: str) -> None:
    """Reclaim the old copies, then compare each server's schemas with the map."""
    smap = load(path)
    time.sleep(max(0.0, settle_of(smap) - (time.time() - os.stat(path).st_mtime)))
    done = reclaim(path, drop=True)
    print(f"reclaim: {len(done.copies)} old copies dropped "
          f"({sum(c.rows for c in done.copies):,} rows)")  # fmt: skip
    smap = load(path)
    for name, port in zip((*MEMBERS, "db4"), PORTS, strict=True):
        held = {f"{graph}_s{s}" for s in smap.shards_of(name)}
        found = set(schemas(port, graph))
        print(f"  {name}: map places {len(held)} shards; schemas {len(found)}; "
              f"orphans {sorted(found - held)}; missing {sorted(held - found)}")  # fmt: skip


def main(
    people: int = 100_000,
    parallel: int = 2,
    replicas: int = 1,
    steady: float = 20.0,
    threads: int = 2,
) -> None:
    if not SCRIPT.exists():
        raise SystemExit(f"{SCRIPT} is missing (it comes with the MySQL backend)")
    servers("start")
    root = Path(tempfile.mkdtemp(prefix="assocdb-rebalance-"))
    graph = f"rebal{os.getpid()}"
    path = write_map(root, graph, replicas)
    g = assocdb.open(path, cache=None)
    backend = g.engine.backend
    assert isinstance(backend, ShardMapBackend)
    try:
        g.define_assoc("follows", inverse="followed_by")
        started = time.perf_counter()
        g.bulk_load(
            (a, "follows", followed(a, k, people), k + 1)
            for a in range(1, people + 1)
            for k in range(FOLLOWS)
        )
        edges = people * FOLLOWS
        print(f"loaded {edges:,} edges ({2 * edges:,} rows with their inverses, "
              f"{replicas} replica(s) a shard) in {time.perf_counter() - started:.0f} s",
              flush=True)  # fmt: skip

        load_ = Load(g, people, Phase(f"before ({steady:.0f} s)"))
        workers = [threading.Thread(target=load_.read, args=(n,)) for n in range(threads)]
        workers += [threading.Thread(target=load_.write, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        phases = [load_.phase]
        time.sleep(steady)

        config = BackendConfig(url=f"mysql://root@127.0.0.1:{PORTS[3]}/{graph}",
                               connect_timeout=0.5, query_timeout=1.0)  # fmt: skip
        save(with_backend(load(path), "db4", config), path)
        planned = make_plan(path, "db4")
        print(f"plan: {len(planned.steps)} moves, "
              f"{sum(s.rows for s in planned.steps):,} rows: " + ", ".join(
                  f"shard {s.shard} {s.source}->{s.target} ({s.rows:,})" for s in planned.steps
              ), flush=True)  # fmt: skip
        load_.phase = Phase(f"rebalancing, {parallel} at a time")
        phases.append(load_.phase)
        started = time.perf_counter()
        done = rebalance(path, planned, parallel=parallel, progress=progress_line)
        took = time.perf_counter() - started
        load_.phase = Phase(f"after ({steady:.0f} s)")
        phases.append(load_.phase)
        time.sleep(steady)
        load_.stop.set()
        for worker in workers:
            worker.join()
        print(f"queue drained: {g.drain(timeout=300)}")
        report(phases)
        for wrong in load_.wrongs[:5]:
            print(f"  wrong: {wrong}")

        backend.reload()
        results(g, load_, phases, done.steps, took)
        reclaimed(path, graph)
    finally:
        g.close()
        for config in load(path).backends.values():
            assert config.url is not None
            MySQLBackend.drop(config.url)
        servers("stop")
