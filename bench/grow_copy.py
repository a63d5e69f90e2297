"""A shard copy's speed beside a bare copy of the same rows (issue 41).

Two MariaDB servers (ASSOCDB_TEST_MYSQL_URLS, or 3307 and 3308 of
`tests/support/mariadb_instances.sh`). A graph of 2 shards is bulk-loaded on
the first; then, in the same run:

* **bare**: shard 0's edges read in key order with the same driver, in pages of
  the copier's size, and inserted into an empty schema of the same table on
  the second server with multi-row INSERTs, one commit a page — what a copy
  costs with no merge, no counts and no map;
* **move**: `move_shard` of shard 0 to the second server, unthrottled (the
  copy phase's rows/s, as its progress reports it; the verify is timed apart).

Prints both rates and their ratio (target: copy >= 50,000 rows/s, >= 0.7x bare).

Run: `python -m bench grow [--edges 200000] [--urls URL,URL]`.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import assocdb
from assocdb.storage import copier
from assocdb.storage.moves import MoveProgress, move_shard
from assocdb.storage.mysql import _SHARD_DDL, MySQLBackend
from assocdb.storage.mysqlpool import connect_args, driver, parse_url
from assocdb.storage.shardmap_config import load
from assocdb.storage.sql import EDGE_COLUMNS

DEFAULT_URLS = "mysql://root@127.0.0.1:3307/,mysql://root@127.0.0.1:3308/"


def write_map(root: Path, graph: str, urls: list[str]) -> Path:
    lines = ["shards = 2", ""]
    for n, url in enumerate(urls[:2], 1):
        lines += [f"[backends.db{n}]", f'url = "{url.rstrip("/")}/{graph}"', ""]
    lines += ["[[placement]]", 'shards = "0-1"', 'replicas = [{backend = "db1"}]', ""]
    path = root / "cluster.toml"
    path.write_text("\n".join(lines))
    return path


def connect(url: str) -> Any:
    settings = parse_url(url + "bench")
    mysqlclient = driver().__name__ == "MySQLdb"
    args = connect_args(settings, mysqlclient, 600.0)
    args.pop("database", None)
    args.pop("db", None)
    return driver().connect(**args)


def bare_copy(source_url: str, target_url: str, schema: str) -> tuple[int, float]:
    """Shard 0's edges copied with nothing but the driver; (rows, seconds)."""
    src, dst = connect(source_url), connect(target_url)
    into = f"{schema}_bare"
    columns = ", ".join(EDGE_COLUMNS)
    try:
        with dst.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {into}")
            cur.execute(f"CREATE DATABASE {into}")
            cur.execute(_SHARD_DDL[0].replace("{s}", into))
        dst.commit()
        insert = f"INSERT INTO {into}.edges ({columns}) VALUES ({', '.join(['%s'] * 7)})"
        first = f"SELECT {columns} FROM {schema}.edges FORCE INDEX (edges_key)"
        page = (
            f"{first} WHERE id1 > %s OR (id1 = %s AND atype > %s) "
            "OR (id1 = %s AND atype = %s AND id2 > %s)"
        )
        order = " ORDER BY id1, atype, id2 LIMIT %s"
        copied, after = 0, None
        started = time.perf_counter()
        while True:
            with src.cursor() as cur:
                if after is None:
                    cur.execute(first + order, (copier.PAGE,))
                else:
                    a, b, c = after
                    cur.execute(page + order, (a, a, b, a, b, c, copier.PAGE))
                rows = list(cur.fetchall())
            src.commit()
            if rows:
                with dst.cursor() as cur:
                    cur.executemany(insert, rows)
                dst.commit()
                copied += len(rows)
                after = rows[-1][:3]
            if len(rows) < copier.PAGE:
                break
        seconds = time.perf_counter() - started
        with dst.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {into}")
        return copied, seconds
    finally:
        src.close()
        dst.close()


def main(edges: int = 200_000, urls: str = "") -> tuple[float, float]:
    """Returns (move rows/s, bare rows/s)."""
    servers = (urls or os.environ.get("ASSOCDB_TEST_MYSQL_URLS") or DEFAULT_URLS).split(",")
    root = Path(tempfile.mkdtemp(prefix="assocdb-grow-copy-"))
    graph = f"growcopy{os.getpid()}"
    path = write_map(root, graph, servers)
    try:
        g = assocdb.open(path, cache=None)
        g.define_assoc("follows", inverse="followed_by")
        rnd = random.Random(1)
        people = max(edges // 10, 10)
        started = time.perf_counter()
        g.bulk_load(
            (a, "follows", rnd.randrange(1, people + 1), n)
            for a in range(1, people + 1)
            for n in range(10)
        )
        g.close()
        print(
            f"loaded {edges:,} edges (and their inverses) in {time.perf_counter() - started:.0f} s"
        )
        bare_rows, bare_s = bare_copy(servers[0], servers[1], f"{graph}_s0")
        bare = bare_rows / bare_s
        print(f"bare copy (driver, multi-row INSERT): {bare_rows:,} rows in {bare_s:.2f} s: "
              f"{bare:,.0f} rows/s")  # fmt: skip
        seen: list[MoveProgress] = []
        result = move_shard(path, 0, "db2", move=True, settle=0, progress=seen.append)
        copying = [p for p in seen if p.phase == "copying"]
        speed = copying[-1].rows_per_second if copying else 0.0
        copy_s = result.copied / speed if speed else 0.0
        print(f"move_shard copy: {result.copied:,} rows in {copy_s:.2f} s: {speed:,.0f} rows/s; "
              f"the whole move, verify included, {result.seconds:.1f} s, "
              f"{result.differences} repaired")  # fmt: skip
        print(f"copy / bare: {speed / bare:.2f}x  (targets: >= 50,000 rows/s, >= 0.7x)")
        return speed, bare
    finally:
        for config in load(path).backends.values():
            assert config.url is not None
            MySQLBackend.drop(config.url)
