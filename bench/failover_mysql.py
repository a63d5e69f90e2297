"""Failover drill on real MariaDB servers (issue 6): stop one for a while under load.

Three MariaDB servers of their own (ports 3310-3312, data under
/tmp/assocdb-failover-mariadb, started with `tests/support/mariadb_instances.sh`,
never the machine's default server), a graph of 16 shards with 2 replicas
each spread over them, and a steady mixed load from two threads: reads of
random follower lists and counts, and one write (a new follow) in ten. The
server holding db2 then goes through:

1. healthy;
2. SIGSTOP for `outage` seconds (a hang: connections stay open, nothing
   answers until the query timeout), then SIGCONT;
3. SIGKILL (a crash), restarted after `outage` seconds;
4. recovered.

Per phase it reports reads, failed reads, read p50/p99/max, writes and how
many were queued; afterwards, that every acknowledged write is readable and
that every pair of replicas holds the same edges and exact counts.

Run: `python -m bench failover --mysql [--outage 30]`.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import assocdb
from assocdb import Graph, Unavailable
from assocdb.storage.shardmap import ShardMapBackend

PORTS = (3310, 3311, 3312)
MEMBERS = ("db1", "db2", "db3")
SHARDS = 16
PEOPLE = 2000
SCRIPT = Path(__file__).resolve().parent.parent / "tests" / "support" / "mariadb_instances.sh"
DATA = Path("/tmp/assocdb-failover-mariadb")
T = TypeVar("T")


@dataclass
class Phase:
    name: str
    reads: list[float] = field(default_factory=list)
    failed_reads: int = 0
    writes: int = 0
    queued: int = 0
    failed_writes: int = 0


@dataclass
class Load:
    """Two threads of mixed load; the main thread moves `phase` along."""

    graph: Graph
    phase: Phase
    acked: list[tuple[int, int]] = field(default_factory=list)  # (id1, id2) of acknowledged writes
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, seed: int) -> None:
        rnd = random.Random(seed)
        next_id2 = 10_000_000 * (seed + 1)
        while not self.stop.is_set():
            phase, person = self.phase, rnd.randrange(1, PEOPLE + 1)
            if rnd.random() < 0.1:
                next_id2 += 1
                try:
                    status = self.graph.assoc_add(person, "follows", next_id2).status
                except Unavailable:
                    phase.failed_writes += 1
                    continue
                with self.lock:
                    self.acked.append((person, next_id2))
                phase.writes += 1
                phase.queued += status == "queued"
                continue
            start = time.perf_counter()
            try:
                if rnd.random() < 0.5:
                    self.graph.assoc_range(person, "followed_by", limit=20)
                else:
                    self.graph.assoc_count(person, "followed_by")
            except Unavailable:
                phase.failed_reads += 1
            phase.reads.append(time.perf_counter() - start)


def servers(action: str) -> None:
    env = {**os.environ, "ASSOCDB_MARIADB_DIR": str(DATA)}
    ports = [str(p) for p in PORTS]
    subprocess.run(["bash", str(SCRIPT), action, *ports], check=True, env=env)


def pid(port: int) -> int:
    return int((DATA / str(port) / "mysqld.pid").read_text())


def write_map(root: Path) -> Path:
    graph = f"failover{os.getpid()}"
    lines = [f"shards = {SHARDS}", ""]
    for name, port in zip(MEMBERS, PORTS, strict=True):
        lines += [f"[backends.{name}]", f'url = "mysql://root@127.0.0.1:{port}/{graph}"']
        lines += ["connect_timeout = 0.5", "query_timeout = 1.0", ""]
    lines += ["[detector]", "threshold = 3", "probe_interval = 0.5", "probe_max = 4.0", ""]
    for shard in range(SHARDS):
        a, b = MEMBERS[shard % 3], MEMBERS[(shard + 1) % 3]
        lines += ["[[placement]]", f'shards = "{shard}"']
        lines += [f'replicas = [{{backend = "{a}"}}, {{backend = "{b}"}}]', ""]
    path = root / "cluster.toml"
    path.write_text("\n".join(lines))
    return path


def patiently(fn: Callable[[], T]) -> T:
    """`fn()`, tried again on Unavailable: pooled connections to a restarted server
    fail once each before they are replaced."""
    for _ in range(20):
        try:
            return fn()
        except Unavailable:
            time.sleep(0.1)
    return fn()


def report(phases: list[Phase]) -> None:
    print(f"{'phase':<34} {'reads':>7} {'failed':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
          f"{'writes':>7} {'queued':>7} {'refused':>7}")  # fmt: skip
    for p in phases:
        lat = sorted(p.reads) or [0.0]
        print(
            f"{p.name:<34} {len(p.reads):>7} {p.failed_reads:>6} "
            f"{statistics.median(lat) * 1000:>8.2f} {lat[int(0.99 * len(lat))] * 1000:>8.2f} "
            f"{lat[-1] * 1000:>8.1f} {p.writes:>7} {p.queued:>7} {p.failed_writes:>7}"
        )


def main(outage: float = 30.0, steady: float = 10.0) -> None:
    if not SCRIPT.exists():
        raise SystemExit(f"{SCRIPT} is missing (it comes with the MySQL backend)")
    servers("start")
    root = Path(tempfile.mkdtemp(prefix="assocdb-failover-mysql-"))
    g = assocdb.open(write_map(root), cache=None)
    backend = g.engine.backend
    assert isinstance(backend, ShardMapBackend)
    try:
        g.define_assoc("follows", inverse="followed_by")
        rnd = random.Random(1)
        g.bulk_load(
            (a, "follows", rnd.randrange(1, PEOPLE + 1), n)
            for a in range(1, PEOPLE + 1)
            for n in range(10)
        )
        load = Load(g, Phase("healthy"))
        threads = [threading.Thread(target=load.run, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        phases = [load.phase]
        time.sleep(steady)
        victim = PORTS[1]  # db2
        for name, stop_signal in (("hang", signal.SIGSTOP), ("crash", signal.SIGKILL)):
            target = pid(victim)
            load.phase = Phase(f"db2 {name} ({signal.Signals(stop_signal).name}, {outage:.0f} s)")
            phases.append(load.phase)
            os.kill(target, stop_signal)
            time.sleep(outage)
            load.phase = Phase(f"after the {name}: {steady:.0f} s")
            phases.append(load.phase)
            if stop_signal == signal.SIGSTOP:
                os.kill(target, signal.SIGCONT)
            else:
                servers("start")
            time.sleep(steady)
        load.stop.set()
        for thread in threads:
            thread.join()
        started = time.perf_counter()
        drained = g.drain(timeout=300)
        drain_s = time.perf_counter() - started
        report(phases)
        lost = [(id1, id2) for id1, id2 in load.acked if not g.assoc_get(id1, "follows", [id2])]
        converged = True
        for shard, (a, b) in enumerate(backend.map.replicas):
            members = [backend.member(r.backend) for r in (a, b)]
            rows = [patiently(lambda m=m, s=shard: m.export_edges(s, None, 10**8)) for m in members]
            counts = [patiently(lambda m=m, s=shard: m.recount(s, False)) for m in members]
            converged &= rows[0] == rows[1] and counts == [[], []]
        print(
            f"queue drained: {drained} ({drain_s:.1f} s after the load stopped); "
            f"acknowledged writes: {len(load.acked)}, lost: {len(lost)}; "
            f"replicas converged (rows and counts): {converged}; "
            f"read failovers: {backend.failovers}; db2 marked down "
            f"{next(m.downs for m in backend.status() if m.name == 'db2')} times"
        )
    finally:
        g.close()
        from assocdb.storage.mysql import MySQLBackend

        for config in backend.map.backends.values():
            assert config.url is not None
            MySQLBackend.drop(config.url)
        servers("stop")
