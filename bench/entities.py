"""Entities benchmark (issue 9): secondary indexes on objects, on SQLite, in one run.

1. building two indexes over N existing objects (objects/s), against SQLite's
   own `CREATE INDEX` on a bare table holding the same rows (one file);
2. `index_query` by equality (one user by email: one shard, then the object
   re-checked) against `SELECT … WHERE email = ?` on the bare table's index;
3. `index_query` by range (`city = ? AND 20 <= age <= 30`, 50 rows, ordered)
   against the same query on the bare table's `(city, age)` index;
4. a durable `obj_update` that changes indexed properties (both indexes
   move: 4 entries on up to 3 more shards) against the same update in a
   graph without indexes.

Objects are written straight into the shards first, as if they predated the
indexes. Run: `python -m bench entities [N]` (default 100,000).
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

import assocdb
from assocdb.core.ids import shard_of
from assocdb.core.merge import ObjRow, State

from .timing import HEADER, compare, row

CITIES = [f"city{i}" for i in range(100)]


def people(n: int) -> list[tuple[int, dict[str, object]]]:
    rnd = random.Random(9)
    return [
        (i, {"email": f"user{i}@example.com", "city": rnd.choice(CITIES), "age": rnd.randrange(90)})
        for i in range(1, n + 1)
    ]


def load(g: assocdb.Graph, rows: list[tuple[int, dict[str, object]]]) -> None:
    otype = g.define_object("user").id
    ua = g.engine.clock.now() - 3600 * 10**6  # written an hour before the indexes are defined
    by_shard: dict[int, list[ObjRow]] = {}
    for id, data in rows:
        obj = ObjRow(id, otype, State.NORMAL, 1, ua, msgspec.json.encode(data))
        by_shard.setdefault(shard_of(id, g.shards), []).append(obj)
    for shard, objs in by_shard.items():
        for start in range(0, len(objs), 5000):
            g.engine.backend.apply(shard, [], objs[start : start + 5000])


def build(g: assocdb.Graph) -> float:
    g.define_index("by_email", "user", ["email"], shard_on="email")
    g.define_index("by_city_age", "user", ["city", "age"], shard_on="city")
    start = time.perf_counter()
    for name in ("by_email", "by_city_age"):
        while g.index_build(name).state != "ready":
            pass
    return time.perf_counter() - start


def bare(
    directory: Path, rows: list[tuple[int, dict[str, object]]]
) -> tuple[sqlite3.Connection, float]:
    conn = sqlite3.connect(directory / "bare.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(
        "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT, city TEXT, age INTEGER, data BLOB)"
    )
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO users VALUES (?, ?, ?, ?, ?)",
        [(i, d["email"], d["city"], d["age"], msgspec.json.encode(d)) for i, d in rows],
    )
    conn.execute("COMMIT")
    start = time.perf_counter()
    conn.execute("CREATE INDEX users_email ON users (email)")
    conn.execute("CREATE INDEX users_city_age ON users (city, age)")
    return conn, time.perf_counter() - start


def main(args: list[str]) -> None:
    n = int(args[0]) if args else 100_000
    rows = people(n)
    directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-"))
    try:
        g = assocdb.open(directory / "graph", shards=16, cache=None)
        load(g, rows)
        build_s = build(g)
        conn, bare_s = bare(directory, rows)
        rnd = random.Random(3)
        emails = [str(rows[rnd.randrange(n)][1]["email"]) for _ in range(1000)]
        cities = [rnd.choice(CITIES) for _ in range(1000)]

        def by_email(i: int) -> object:
            return g.index_query("by_email", [emails[i % 1000]]).items

        def bare_email(i: int) -> object:
            sql = "SELECT id, data FROM users WHERE email = ?"
            return conn.execute(sql, (emails[i % 1000],)).fetchall()

        def by_range(i: int) -> object:
            return g.index_query("by_city_age", [cities[i % 1000]], 20, 30, limit=50).items

        def bare_range(i: int) -> object:
            sql = (
                "SELECT id, data FROM users WHERE city = ? AND age BETWEEN 20 AND 30 "
                "ORDER BY age, id LIMIT 50"
            )
            return conn.execute(sql, (cities[i % 1000],)).fetchall()

        eq_us, eq_sql = compare(by_email, bare_email, calls=2000, rounds=5)
        range_us, range_sql = compare(by_range, bare_range, calls=300, rounds=5)
        plain = assocdb.open(directory / "plain", shards=16, cache=None)
        load(plain, rows[:1000])

        def update(graph: assocdb.Graph) -> Callable[[int], object]:
            return lambda i: graph.obj_update(
                1 + i % 1000, {"city": CITIES[i % 100], "age": i % 90, "email": f"e{i}"}
            )

        write_us, plain_us = compare(update(g), update(plain), calls=200, rounds=3)
        conn.close()
        plain.close()
        g.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(f"entities benchmark (SQLite, 16 shards, {n:,} users; baselines measured in this run)")
    print(HEADER)
    ours, theirs = 2 * n / build_s, 2 * n / bare_s
    target = "(FriendFeed: online, resumable)"
    print(
        row(
            "index build, entries/s (2 indexes)",
            f"{ours:,.0f}",
            f"{theirs:,.0f}",
            ours / theirs,
            target,
        )
    )
    print(
        row(
            "index_query by email, µs",
            f"{eq_us:.1f}",
            f"{eq_sql:.1f}",
            eq_us / eq_sql,
            "re-checked",
        )
    )
    print(
        row(
            "index_query city + age range, 50 rows, µs",
            f"{range_us:.1f}",
            f"{range_sql:.1f}",
            range_us / range_sql,
            "re-checked",
        )
    )
    print(
        row(
            "obj_update moving 2 indexes, µs (durable)",
            f"{write_us:.0f}",
            f"{plain_us:.0f}",
            write_us / plain_us,
            "vs no indexes",
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
