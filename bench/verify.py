"""Replica verify with per-range checksums vs streaming every row (issue 19).

A shard map of 2 logical shards, each with 2 replicas (on SQLite directories,
or on the MariaDB servers given with `--mysql URL,URL`), each shard holding
`--rows` edges (and their count rows) written straight to both replicas. Then
`verify_replicas` runs twice on the same data in the same run: `span=0` (every
row of every replica read and compared, the way verify worked before) and the
default span (a checksum per range on each server, rows only where they
differ); then once more of each after one edge row is deleted from one replica.

Run: `python -m bench verify [--rows 200000] [--mysql URL,URL]`.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import uuid
from pathlib import Path

import assocdb
from assocdb.storage.replica_verify import SPAN, verify_replicas
from assocdb.storage.shardmap import ShardMapBackend
from assocdb.storage.sql import SQLBackend

SHARDS = 2
BATCH = 5000


def write_map(root: Path, urls: list[str]) -> Path:
    lines = [f"shards = {SHARDS}", ""]
    graph = f"bv{uuid.uuid4().hex[:8]}"
    for n in range(2):
        lines.append(f"[backends.db{n}]")
        lines.append(f'url = "{urls[n].rstrip("/")}/{graph}_db{n}"' if urls else f'path = "db{n}"')
        lines += ["query_timeout = 60", ""]
    for shard in range(SHARDS):
        lines += ["[[placement]]", f'shards = "{shard}"']
        lines += ['replicas = [{backend = "db0"}, {backend = "db1"}]', ""]
    path = root / "cluster.toml"
    path.write_text("\n".join(lines))
    return path


def load(backend: ShardMapBackend, rows: int) -> None:
    rng = random.Random(7)
    for shard in range(SHARDS):
        edges = sorted({(rng.randrange(1, 2001), 1, rng.randrange(1, 10**9)) for _ in range(rows)})
        for start in range(0, len(edges), BATCH):
            batch = [
                (a, t, b, 0, 1000 + b % 97, 1, None) for a, t, b in edges[start : start + BATCH]
            ]
            for name in backend.map.backends:
                backend.member(name).apply(shard, batch, [])


def delete_one_edge(backend: ShardMapBackend) -> None:
    """Delete shard 0's first edge on replica db1, around the write path."""
    member = backend.member("db1")
    assert isinstance(member, SQLBackend)
    key = member.export_edges(0, None, 1)[0][:3]
    sql = member._q("DELETE FROM {s}.edges WHERE id1 = ? AND atype = ? AND id2 = ?", 0)
    member._in_transaction(0, lambda session: member._run(session, 0, sql, key))


def timed(backend: ShardMapBackend, span: int) -> tuple[float, int, int]:
    started = time.perf_counter()
    report = verify_replicas(backend, span=span)
    return time.perf_counter() - started, report.rows, len(report.differences)


def main(args: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench verify")
    parser.add_argument("--rows", type=int, default=200_000, help="edges per shard")
    parser.add_argument("--mysql", default="", help="two MariaDB server URLs, comma-separated")
    options = parser.parse_args(args)
    urls = [url for url in options.mysql.split(",") if url]
    with tempfile.TemporaryDirectory() as tmp:
        path = write_map(Path(tmp), urls)
        graph = assocdb.open(path)
        try:
            backend = graph.engine.backend
            assert isinstance(backend, ShardMapBackend)
            load(backend, options.rows)
            where = "MariaDB " + ",".join(urls) if urls else "SQLite"
            print(f"{where}: {SHARDS} shards x 2 replicas, ~{options.rows:,} edges per shard")
            for label in ("identical replicas", "one edge deleted on one replica"):
                if label.startswith("one"):
                    delete_one_edge(backend)
                for span, name in ((0, "every row (before)"), (SPAN, f"checksums span={SPAN}")):
                    seconds, rows, found = timed(backend, span)
                    figures = f"{seconds:7.2f} s  rows {rows:,}  differences {found}"
                    print(f"  {label:34} {name:24} {figures}")
        finally:
            configs = list(backend.map.backends.values())
            graph.close()
            if urls:
                from assocdb.storage.mysql import MySQLBackend

                for config in configs:
                    assert config.url is not None
                    MySQLBackend.drop(config.url)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
