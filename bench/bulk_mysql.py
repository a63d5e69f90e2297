"""`python -m bench bulk --mysql URL`: the bulk loads of `bench.bulk` on MariaDB/MySQL.

Beside assocdb's `bulk_load` (fresh, and on a graph that holds a third of the
edges), two bare loads of the same rows and counts into the same schemas, one
connection, one transaction per shard, rows sorted by primary key: multi-row
INSERTs (the driver's `executemany`) and `LOAD DATA LOCAL INFILE` of a
tab-separated file per shard (reported as not allowed when the server or
driver refuses it).
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Callable
from typing import Any

import assocdb
from assocdb.storage.mysql import MySQLBackend
from assocdb.storage.mysqlpool import connect_args

from . import bulk

NAME = "bench_bulk"


def _url(server: str) -> str:
    return f"{server.rstrip('/')}/{NAME}?query_timeout=600"


def _graph(server: str) -> assocdb.Graph:
    MySQLBackend.drop(_url(server))
    graph = assocdb.open(_url(server), shards=bulk.SHARDS, journal=":memory:", cache=None)
    graph.define_assoc("follows", inverse="followed_by")
    return graph


def load(
    server: str, pairs: list[tuple[int, int]], before: list[tuple[int, int]]
) -> tuple[float, float]:
    with _graph(server) as graph:
        if before:
            graph.bulk_load(bulk.edges_of(before))
        with bulk.Timer() as timer:
            graph.bulk_load(bulk.edges_of(pairs))
        return timer.took


def _connect(graph: assocdb.Graph, **extra: Any) -> Any:
    backend: MySQLBackend = graph.engine.backend  # type: ignore[assignment]
    args = connect_args(backend.settings, backend._mysqlclient, 600.0)
    return backend._driver.connect(**args, **extra)


def bare_insert(server: str, pairs: list[tuple[int, int]]) -> tuple[float, float]:
    with _graph(server) as graph:
        conn = _connect(graph)
        schemas = graph.engine.backend._schemas  # type: ignore[attr-defined]
        with bulk.Timer() as timer, conn.cursor() as cur:
            for shard, rows in sorted(bulk.bare_rows(pairs).items()):
                counts = Counter((row[0], row[1]) for row in rows)
                cur.execute("START TRANSACTION")
                cur.executemany(
                    f"INSERT INTO {schemas[shard]}.edges VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    rows,
                )
                cur.executemany(
                    f"INSERT INTO {schemas[shard]}.counts VALUES (%s, %s, 0, %s)",
                    [(a, t, n) for (a, t), n in sorted(counts.items())],
                )
                cur.execute("COMMIT")
        conn.close()
        return timer.took


def bare_load_data(server: str, pairs: list[tuple[int, int]]) -> tuple[float, float]:
    with _graph(server) as graph:
        conn = _connect(graph, local_infile=True)
        schemas = graph.engine.backend._schemas  # type: ignore[attr-defined]
        with bulk.Timer() as timer, conn.cursor() as cur, tempfile.TemporaryDirectory() as tmp:
            for shard, rows in sorted(bulk.bare_rows(pairs).items()):
                counts = Counter((row[0], row[1]) for row in rows)
                edges, count_file = os.path.join(tmp, "edges"), os.path.join(tmp, "counts")
                with open(edges, "w") as out:
                    out.writelines(
                        f"{a}\t{t}\t{b}\t0\t{tm}\t1\t\\N\n" for a, t, b, _, tm, _, _ in rows
                    )
                with open(count_file, "w") as out:
                    out.writelines(f"{a}\t{t}\t0\t{n}\n" for (a, t), n in sorted(counts.items()))
                cur.execute("START TRANSACTION")
                cur.execute(f"LOAD DATA LOCAL INFILE '{edges}' INTO TABLE {schemas[shard]}.edges")
                cur.execute(
                    f"LOAD DATA LOCAL INFILE '{count_file}' INTO TABLE {schemas[shard]}.counts"
                )
                cur.execute("COMMIT")
        conn.close()
        return timer.took


def main(
    server: str, pairs: list[tuple[int, int]], before: list[tuple[int, int]], runs: int
) -> None:
    ways: dict[str, Callable[[str], tuple[float, float]]] = {
        "assocdb bulk_load, fresh": lambda _: load(server, pairs, []),
        "assocdb bulk_load, 1/3 loaded": lambda _: load(server, pairs, before),
        "bare": lambda _: bare_insert(server, pairs),
    }
    try:
        bare_load_data(server, pairs[:1000])
        ways["bare LOAD DATA LOCAL INFILE"] = lambda _: bare_load_data(server, pairs)
    except Exception as exc:  # the server or driver refuses it: say so
        print(f"LOAD DATA LOCAL INFILE not allowed here: {exc}")
    try:
        bulk.report("MariaDB", pairs, bulk.measure(runs, pairs, ways))
    finally:
        MySQLBackend.drop(_url(server))
