"""Growth drill on real MariaDB servers (issue 19): add a server and move shards onto it.

Four MariaDB servers of their own (ports 3313-3316, data under
/tmp/assocdb-grow-mariadb, started with `tests/support/mariadb_instances.sh`,
never the machine's default server). A graph of 16 shards with 2 replicas
each lives on the first three; two threads keep a steady mixed load on it
(reads of random follower lists and counts, one write in ten: a new
follow). Then the fourth server joins the map and half the shard copies of
the busiest server move to it, one shard after another, throttled with
`rate` rows/s so the move takes a few minutes, while the load goes on.

Per phase (before, during and after the move) it reports reads, failed
reads, read p50/p99/max, writes and how many were queued; then the move's
throughput, that every acknowledged write is readable, and a final
`shards verify` of every shard (goal: 0 differences).

Run: `python -m bench grow --drill [--rate 150] [--steady 20]`.
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import assocdb
from assocdb.storage.moves import MoveProgress, move_shard
from assocdb.storage.replica_verify import verify_replicas
from assocdb.storage.shardmap import ShardMapBackend
from assocdb.storage.shardmap_config import BackendConfig, load, save, with_backend

from .failover_mysql import PEOPLE, SCRIPT, Load, Phase, report

PORTS = (3313, 3314, 3315, 3316)
MEMBERS = ("db1", "db2", "db3")
SHARDS = 16
DATA = Path("/tmp/assocdb-grow-mariadb")


def servers(action: str) -> None:
    env = {**os.environ, "ASSOCDB_MARIADB_DIR": str(DATA)}
    subprocess.run(["bash", str(SCRIPT), action, *map(str, PORTS)], check=True, env=env)


def write_map(root: Path, graph: str) -> Path:
    lines = [f"shards = {SHARDS}", ""]
    for name, port in zip(MEMBERS, PORTS, strict=False):
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


def grow(path: Path, graph: str, rate: float) -> tuple[str, list[int], int, float]:
    """Add db4, then move half the shard copies of the busiest server to it, one at a
    time; returns that server, the shards moved, rows copied, mean copy rows/s."""
    smap = load(path)
    busiest = max(MEMBERS, key=lambda name: len(smap.shards_of(name)))
    held = smap.shards_of(busiest)
    moving = held[: len(held) // 2]
    config = BackendConfig(url=f"mysql://root@127.0.0.1:{PORTS[3]}/{graph}",
                           connect_timeout=0.5, query_timeout=1.0)  # fmt: skip
    save(with_backend(smap, "db4", config), path)
    speeds: list[float] = []
    copied = 0
    for shard in moving:
        last: list[MoveProgress] = []
        result = move_shard(
            path, shard, "db4", move=True, remove=busiest, rate=rate or None, progress=last.append
        )
        copied += result.copied
        if last:
            speeds.append(last[-1].rows_per_second)
        print(f"shard {shard}: {result.copied} rows, {result.differences} repaired, "
              f"{result.seconds:.1f} s")  # fmt: skip
    return busiest, moving, copied, sum(speeds) / max(len(speeds), 1)


def main(rate: float = 150.0, steady: float = 20.0) -> None:
    if not SCRIPT.exists():
        raise SystemExit(f"{SCRIPT} is missing (it comes with the MySQL backend)")
    servers("start")
    root = Path(tempfile.mkdtemp(prefix="assocdb-grow-mysql-"))
    graph = f"grow{os.getpid()}"
    path = write_map(root, graph)
    g = assocdb.open(path, cache=None)
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
        load_ = Load(g, Phase(f"before the move ({steady:.0f} s)"))
        threads = [threading.Thread(target=load_.run, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        phases = [load_.phase]
        time.sleep(steady)

        load_.phase = Phase("moving half the busiest server's shards to db4")
        phases.append(load_.phase)
        started = time.perf_counter()
        busiest, moving, copied, speed = grow(path, graph, rate)
        load_.phase.name = f"moving {len(moving)} shards to db4"
        moved_s = time.perf_counter() - started
        load_.phase = Phase(f"after the move ({steady:.0f} s)")
        phases.append(load_.phase)
        time.sleep(steady)
        load_.stop.set()
        for thread in threads:
            thread.join()
        drained = g.drain(timeout=300)
        report(phases)
        lost = [(a, b) for a, b in load_.acked if not g.assoc_get(a, "follows", [b])]
        verified = verify_replicas(backend)
        before, during = (sorted(p.reads) or [0.0] for p in phases[:2])
        p99 = [lat[int(0.99 * len(lat))] * 1000 for lat in (before, during)]
        print(
            f"moved {len(moving)} shards ({copied:,} rows) in {moved_s:.0f} s; copy "
            f"throughput {speed:,.0f} rows/s (--rate {rate:.0f}); "
            f"read p99 during/before {p99[1] / p99[0]:.2f}x; queue drained: {drained}; "
            f"acknowledged writes: {len(load_.acked)}, lost: {len(lost)}; "
            f"shards verify: {len(verified.differences)} differences in "
            f"{verified.rows:,} rows ({verified.seconds:.1f} s); "
            f"{busiest} now holds {len(load(path).shards_of(busiest))} shards, "
            f"db4 {len(load(path).shards_of('db4'))}"
        )
    finally:
        g.close()
        from assocdb.storage.mysql import MySQLBackend

        for config in load(path).backends.values():
            assert config.url is not None
            MySQLBackend.drop(config.url)
        servers("stop")
