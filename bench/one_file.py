"""What the 16 shards' tables in one SQLite file would give (issues 37 and 43), bare.

    python -m bench.one_file [--preload N] [--rounds R] [--seconds S] [--edges E]

A layout measured before it is built: the same schema, statements and pragmas
as assocdb's shards (`bench.writes.OwnStatements`), but every shard's tables
(`edges_N`, `counts_N`, `node_states_N`) in one file instead of a file each.
No assocdb code runs: these are floors, beside the same work by hand.

Writes (each store preloaded with N random edges over 2,000,000 ids; batches of
1 and of 100 random writes with inverses, rounds interleaved):

* 16 files + journal: assocdb's 16 shard files and the journal (`OwnStatements`: the reads before
  journaling, the journal's INSERTs and fsynced COMMIT, then per touched
  shard BEGIN IMMEDIATE, the key read, the edges' and counts' upserts, COMMIT);
* one file + journal: the same, the shards' statements in one transaction of
  the one file (one COMMIT a batch instead of one per touched shard);
* one file, no journal: the reads and upserts in one fsynced transaction of
  the one file (what a graph on one file needs: the transaction is atomic);
* by hand: `bench.writes.Bare` (one file: edge, inverse, both counts).

Reads (the Slashdot-shaped graph of `bench reads`, its popularity-weighted
nodes; p50 µs a call, stores interleaved call by call): the mutual followees
of two nodes (two statements on two files, the first list's ids read into
Python and bound again for the probe, or handed on as the JSON array the
engine built, as assocdb does; one file: one join) and the
two-hop reach (assocdb: the followees' read and one statement per shard holding
their lists; one file: the followees' read and one statement), against the
hand-written join.

The one file's connections keep 1,024 prepared statements (a mutual's join is
one statement per pair of shards, 256; past the driver's default 128 each call
prepared its statement again, and the join looked 2.3x slower than it is) and
checkpoint its WAL at 16,000 pages (`--checkpoint`), what the 16 files hold
together.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import assocdb
from assocdb.core.ids import shard_of
from assocdb.storage.sqlite import _DDL as SHARD_DDL
from assocdb.writes.journal import _DDL as JOURNAL_DDL

from . import reads
from .bulk import EDGES, NODES, slashdot_like
from .writes import Bare, OwnStatements, pair, rate

SHARDS = OwnStatements.SHARDS
TABLES = ("edges", "counts", "node_states")
PRAGMAS = ("journal_mode = WAL", "mmap_size = 268435456", "cache_size = -256000")
#: The one file's `wal_autocheckpoint`: as many WAL pages as the 16 shard files' 1,000
#: each hold together (with SQLite's 1,000 the one file wrote 20-30% slower).
CHECKPOINT = 16_000


def shard_ddl(n: int) -> str:
    """assocdb's shard tables as one shard's set in a shared file (`edges_N`, ...)."""
    kept = [
        statement
        for statement in SHARD_DDL.split(";")
        if any(f"EXISTS {name} " in statement for name in (*TABLES, "edges_key"))
    ]
    ddl = ";".join(kept) + ";"
    ddl = ddl.replace("edges_key ON edges", f"edges_key_{n} ON edges_{n}")
    for table in TABLES:
        ddl = ddl.replace(f"EXISTS {table} ", f"EXISTS {table}_{n} ")
    return ddl


def connect(path: Path, synchronous: str, checkpoint: int = CHECKPOINT) -> sqlite3.Connection:
    # (a join statement per pair of shards: 256, over the driver's default cache of 128)
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, cached_statements=1024
    )
    for pragma in (*PRAGMAS, f"synchronous = {synchronous}", f"wal_autocheckpoint = {checkpoint}"):
        conn.execute(f"PRAGMA {pragma}")
    return conn


class OneFile:
    """`OwnStatements` with the shards' tables in one file: with the journal (its own
    file, fsynced, then one NORMAL transaction for every shard) or without it (one
    fsynced transaction)."""

    KEYS = "SELECT * FROM edges_{n} INDEXED BY edges_key_{n} WHERE "
    NODES = "SELECT * FROM node_states_{n} WHERE "
    EDGE = "INSERT OR REPLACE INTO edges_{n} VALUES (?, ?, ?, ?, ?, ?, ?)"
    COUNT = (
        "INSERT INTO counts_{n} VALUES (?, ?, ?, ?) "
        "ON CONFLICT (id1, atype, state) DO UPDATE SET n = n + excluded.n"
    )

    def __init__(self, directory: Path, journal: bool, checkpoint: int = CHECKPOINT) -> None:
        directory.mkdir()
        self.conn = connect(directory / "graph.db", "NORMAL" if journal else "FULL", checkpoint)
        for n in range(SHARDS):
            self.conn.executescript(shard_ddl(n))
        self.journal = None
        if journal:
            self.journal = OwnStatements._open(directory / "journal.db", "FULL", JOURNAL_DDL)

    def preload(self, edges: int, rnd: random.Random) -> None:
        for start in range(0, edges, 100_000):
            legs = _legs(min(100_000, edges - start), rnd, 1)
            self.conn.execute("BEGIN IMMEDIATE")
            for n, rows in legs.items():
                self.conn.executemany(self.EDGE.format(n=n), rows)
                self.conn.executemany(self.COUNT.format(n=n), [(r[0], r[1], 0, 1) for r in rows])
            self.conn.execute("COMMIT")

    def commit(self, rnd: random.Random, writes: int) -> int:
        now = time.time_ns() // 1000
        legs = _legs(writes, rnd, now)
        conn = self.conn
        if self.journal is not None:
            self._reads(legs)  # (before journaling, as `OwnStatements`)
            self.journal.execute("BEGIN IMMEDIATE")
            for _ in range(writes):
                self.journal.execute(
                    "INSERT INTO jobs (body, created_at) VALUES (?, ?)", (b"j" * 70, now)
                )
            self.journal.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")
        else:
            conn.execute("BEGIN IMMEDIATE")
            self._reads(legs)
        for n, rows in sorted(legs.items()):
            match = " OR ".join(["(id1 = ? AND atype = ? AND id2 = ?)"] * len(rows))
            conn.execute(self.KEYS.format(n=n) + match, [v for r in rows for v in r[:3]]).fetchall()
            conn.executemany(self.EDGE.format(n=n), rows)
            conn.executemany(self.COUNT.format(n=n), [(r[0], r[1], 0, 1) for r in rows])
        conn.execute("COMMIT")
        return writes

    def _reads(self, legs: dict[int, list[tuple[Any, ...]]]) -> None:
        for n, rows in legs.items():
            forward = [r for r in rows if r[1] == 1]
            if forward:
                match = " OR ".join(["(id1 = ? AND atype = ? AND id2 = ?)"] * len(forward))
                sql = self.KEYS.format(n=n) + match
                self.conn.execute(sql, [v for r in forward for v in r[:3]]).fetchall()
            nodes = " OR ".join(["(node = ? AND atype = ?)"] * len(rows))
            sql = self.NODES.format(n=n) + nodes
            self.conn.execute(sql, [v for r in rows for v in r[:2]]).fetchall()

    def close(self) -> None:
        self.conn.close()
        if self.journal is not None:
            self.journal.close()


def _legs(writes: int, rnd: random.Random, now: int) -> dict[int, list[tuple[Any, ...]]]:
    legs: dict[int, list[tuple[Any, ...]]] = {}
    for _ in range(writes):
        a, b = pair(rnd)
        for row in ((a, 1, b, 0, now // 1000, now, None), (b, 2, a, 0, now // 1000, now, None)):
            legs.setdefault(shard_of(row[0], SHARDS), []).append(row)
    return legs


def write_floors(root: Path, preload: int, rounds: int, seconds: float, checkpoint: int) -> None:
    stores: dict[str, Any] = {
        "16 files + journal (assocdb)": OwnStatements(root / "today"),
        "one file + journal": OneFile(root / "one_journal", True, checkpoint),
        "one file, no journal": OneFile(root / "one", False, checkpoint),
        "by hand (one file, fsync a COMMIT)": Bare(root / "bare.db"),
    }
    started = time.perf_counter()
    for n, store in enumerate(stores.values()):
        store.preload(preload, random.Random(n))
    print(f"preloaded {preload:,} edges into each store in {time.perf_counter() - started:.0f} s")
    for batch in (1, 100):
        found: dict[str, list[float]] = {name: [] for name in stores}
        p50s: dict[str, list[float]] = {name: [] for name in stores}
        for _ in range(rounds):
            for name, store in stores.items():
                latencies: list[float] = []
                found[name].append(
                    rate(1, seconds, lambda r, s=store, n=batch: s.commit(r, n), latencies)
                )
                p50s[name].append(statistics.median(latencies) * 1e6)
        hand = statistics.median(found["by hand (one file, fsync a COMMIT)"])
        print(f"\n{batch} write(s) a batch, writes/s: median (min-max) of {rounds}, p50 µs a batch")
        for name, runs in found.items():
            median = statistics.median(runs)
            print(
                f"  {name:<38} {median:>8,.0f} ({min(runs):,.0f}-{max(runs):,.0f})"
                f"  {median / hand:.2f}x by hand   p50 {statistics.median(p50s[name]):,.0f}"
            )
    for store in stores.values():
        (store.conn if isinstance(store, Bare) else store).close()


def one_file_copy(shards: Path, target: Path) -> sqlite3.Connection:
    """The shards of a bulk-loaded graph copied into one file's table sets."""
    conn = connect(target, "NORMAL")
    for n in range(SHARDS):
        conn.executescript(shard_ddl(n))
        conn.execute(f"ATTACH ? AS s{n}", (str(shards / f"shard-{n:04d}.db"),))
        conn.execute("BEGIN")
        for table in TABLES:
            conn.execute(f"INSERT INTO {table}_{n} SELECT * FROM s{n}.{table}")
        conn.execute("COMMIT")
        conn.execute(f"DETACH s{n}")
    return conn


MUTUAL_TWO = (  # a's list by key on its shard, then b's probed on its own
    "SELECT id2 FROM edges INDEXED BY edges_key WHERE id1 = ? AND atype = ? AND state = 0"
    " ORDER BY id2 DESC",
    "WITH ids (id2) AS (SELECT value FROM json_each(?)) SELECT edges.id2 FROM ids CROSS JOIN"
    " edges INDEXED BY edges_key ON edges.id1 = ? AND edges.atype = ? AND edges.id2 = ids.id2"
    " AND edges.state = 0 ORDER BY edges.id2 DESC LIMIT 100",
)
MUTUAL_SHORT = f"SELECT count(*), json_group_array(id2) FROM ({MUTUAL_TWO[0]})"
MUTUAL_ONE = (
    "SELECT a.id2 FROM edges_{a} a INDEXED BY edges_key_{a} JOIN edges_{b} b INDEXED BY"
    " edges_key_{b} ON b.id1 = ?2 AND b.atype = ?3 AND b.id2 = a.id2 AND b.state = 0"
    " WHERE a.id1 = ?1 AND a.atype = ?3 AND a.state = 0 ORDER BY a.id2 DESC LIMIT 100"
)
FOLLOWEES = (
    "SELECT id2 FROM edges{n} INDEXED BY edges_key{n} WHERE id1 = ? AND atype = ? AND state = 0"
)
REACH_PART = (
    "SELECT edges{n}.id2 FROM json_each(?) AS ids CROSS JOIN edges{n}"
    " ON edges{n}.id1 = ids.value AND edges{n}.atype = ? AND edges{n}.state = 0"
)

REACH_ONE = "SELECT json_group_array(id2) FROM ({})".format(
    " UNION ALL ".join(REACH_PART.format(n=f"_{n}") for n in range(SHARDS))
)


def read_floors(root: Path, edges: int, rounds: int) -> None:
    root.mkdir()
    pairs = slashdot_like(NODES, edges)
    reads.load_all(root, pairs, kuzu=False)
    one = one_file_copy(root / "assocdb", root / "one.db")
    hand = reads.hand_connect(root / "hand.db")
    files = [connect(root / "assocdb" / f"shard-{n:04d}.db", "NORMAL") for n in range(SHARDS)]
    with assocdb.open(root / "assocdb") as g:
        follows = g.engine.assoc_type("follows").id
    graph = reads.Graph(pairs)
    rnd = random.Random(43)
    mutual_args = graph.args(reads.MUTUAL, 1000, rnd)
    reach_args = graph.args(reads.TWO_HOP, 300, rnd)
    of = {a: shard_of(a, SHARDS) for arg in (*mutual_args, *reach_args) for a in arg}

    def mutual_rebound(a: int, b: int) -> list[int]:
        ids = [r[0] for r in files[of[a]].execute(MUTUAL_TWO[0], (a, follows))]
        if not ids:
            return []
        found = files[of[b]].execute(MUTUAL_TWO[1], (json.dumps(ids), b, follows))
        return [r[0] for r in found]

    def mutual_json(a: int, b: int) -> list[int]:
        # (`SQLiteBackend.probe_short`: a's ids handed on as the engine's JSON array)
        count, ids = files[of[a]].execute(MUTUAL_SHORT, (a, follows)).fetchone()
        if not count:
            return []
        return [r[0] for r in files[of[b]].execute(MUTUAL_TWO[1], (ids, b, follows))]

    one_mutual_sql: dict[tuple[int, int], str] = {}

    def one_mutual(a: int, b: int) -> list[int]:
        key = (of[a], of[b])
        sql = one_mutual_sql.get(key)
        if sql is None:
            sql = one_mutual_sql[key] = MUTUAL_ONE.format(a=key[0], b=key[1])
        return [r[0] for r in one.execute(sql, (a, b, follows))]

    def hand_mutual(a: int, b: int) -> list[int]:
        return [r[0] for r in hand.execute(reads.HAND_SQL[reads.MUTUAL], (a, b))]

    def reach(conns: Callable[[int], sqlite3.Connection], one_file: bool) -> Callable[[int], int]:
        def count(a: int) -> int:
            sa = of[a]
            suffix = f"_{sa}" if one_file else ""
            followees = [r[0] for r in conns(sa).execute(FOLLOWEES.format(n=suffix), (a, follows))]
            groups: dict[int, list[int]] = {}
            for f in followees:
                groups.setdefault(shard_of(f, SHARDS), []).append(f)
            seen: set[int] = set()
            if one_file:
                # every shard's part, an empty one '[]': one statement, prepared once
                params: list[Any] = []
                for n in range(SHARDS):
                    params += [json.dumps(groups.get(n, [])), follows]
                sql = REACH_ONE
                seen.update(json.loads(one.execute(sql, params).fetchone()[0]))
            else:
                for n, ids in groups.items():
                    sql = f"SELECT json_group_array(id2) FROM ({REACH_PART.format(n='')})"
                    row = files[n].execute(sql, (json.dumps(ids), follows)).fetchone()
                    seen.update(json.loads(row[0]))
            return len(seen)

        return count

    def hand_reach(a: int) -> int:
        return int(hand.execute(reads.HAND_SQL[reads.TWO_HOP], (a,)).fetchone()[0])

    cases: dict[str, tuple[dict[str, Callable[..., Any]], list[tuple[Any, ...]]]] = {
        "mutual (first 100)": (
            {
                "two files, ids read, bound again": mutual_rebound,
                "two files, ids as JSON (assocdb)": mutual_json,
                "one file: one join": one_mutual,
                "by hand": hand_mutual,
            },
            mutual_args,
        ),
        "two-hop reach (degree 10-50)": (
            {
                "16 files: a statement a shard (assocdb)": reach(lambda n: files[n], False),
                "one file: one statement": reach(lambda n: one, True),
                "by hand": hand_reach,
            },
            [(a,) for (a,) in reach_args],
        ),
    }
    for case, (stores, args) in cases.items():
        compare(case, stores, args, rounds)
    for conn in (one, hand, *files):
        conn.close()


def compare(
    case: str, stores: dict[str, Callable[..., Any]], args: list[tuple[Any, ...]], rounds: int
) -> None:
    """Print each store's p50 µs a call and its ratio to "by hand", the stores called in
    turn on each node (the order rotated), after checking that their answers agree."""
    for arg in args[:50]:
        answers = [fn(*arg) for fn in stores.values()]
        assert all(x == answers[0] for x in answers), (case, arg, answers)
    samples: dict[str, list[float]] = {name: [] for name in stores}
    order = list(stores.items())
    for r in range(rounds):
        for i, arg in enumerate(args):
            turn = order[(i + r) % len(order) :] + order[: (i + r) % len(order)]
            for name, fn in turn:
                started = time.perf_counter()
                fn(*arg)
                samples[name].append(time.perf_counter() - started)
    hand_p50 = statistics.median(samples["by hand"])
    print(f"\n{case}: p50 µs a call over {rounds} rounds of {len(args)} nodes")
    for name, times in samples.items():
        p50 = statistics.median(times)
        print(f"  {name:<32} {p50 * 1e6:>8.1f}  {p50 / hand_p50:.2f}x by hand")


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.one_file", description=__doc__)
    parser.add_argument("--preload", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--edges", type=int, default=EDGES)
    parser.add_argument("--skip-writes", action="store_true")
    parser.add_argument("--skip-reads", action="store_true")
    parser.add_argument(
        "--checkpoint", type=int, default=CHECKPOINT, help="the one file's wal_autocheckpoint"
    )
    options = parser.parse_args(args)
    root = Path(tempfile.mkdtemp(prefix="assocdb-one-file-"))
    try:
        if not options.skip_reads:
            read_floors(root / "reads", options.edges, options.rounds)
        if not options.skip_writes:
            (root / "writes").mkdir()
            write_floors(
                root / "writes",
                options.preload,
                options.rounds,
                options.seconds,
                options.checkpoint,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
