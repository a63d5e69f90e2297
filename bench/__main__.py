"""Run the benchmarks: `python -m bench` (or `make bench`) runs them all at a
quick scale; `python -m bench NAME [options]` runs one with its own options:

    python -m bench foundation
    python -m bench journal
    python -m bench writes [--seconds S] [--rounds N] [--preload E]  (durable writes vs bare)
    python -m bench feed [--seconds S] [--rounds N] [--preload E]  (issue 38: write cost,
                                               consumer rate, write→seen latency)
    python -m bench backup [--edges N] [--runs R] [--writers W]   (backup/restore edges/s,
                                               write latency during a backup vs quiet)
    python -m bench bulk [--edges N] [--mysql URL] [--snap FILE]   (default 948,464 edges)
    python -m bench flockdb [followers]        (default 1,000,000)
    python -m bench http                       (needs wrk)
    python -m bench thrift [--seconds S]       (FlockDB's Thrift interface vs the HTTP API)
    python -m bench cache                      (needs Redis)
    python -m bench reads [--edges N] [--snap FILE] [--runs R] [--calls C] [--no-kuzu]
                          (cache on/off vs SQLite by hand [vs Kùzu], popularity-weighted)
    python -m bench space [--edges N] [--snap FILE]   (bytes on disk after a bulk load, by table
                                               and index, beside SQLite by hand)
    python -m bench linkbench [options]        (--help for them)
    python -m bench mysql                      (needs MariaDB/MySQL)
    python -m bench postgres                   (needs PostgreSQL)
    python -m bench timelines [--quick]        (1,000,000 followers; --quick: 100,000)
    python -m bench entities [objects]         (default 100,000)
    python -m bench failover [reads]           (default 2,000 per phase)
    python -m bench deletion [--edges N] [--runs R]   (a cascade's edges/s vs batched deletes,
                                                     and another writer's latency meanwhile)
    python -m bench verify [--rows N] [--mysql URL,URL]   (replica verify: checksums vs every row)
    python -m bench ttl [--edges N]            (reads of a type with a ttl vs none; expiry pass)
    python -m bench failover --mysql [--outage 30]   (own MariaDB servers, SIGSTOP/SIGKILL)
    python -m bench grow [--edges 200000] [--urls URL,URL]  (a shard copy vs a bare copy of its
                                                     rows on two MariaDB servers: rows/s, ratio)
    python -m bench grow --drill [--rate 150] [--steady 20]  (own MariaDB servers: a 4th joins,
                                                     shards move; --rate 0: unthrottled)
    python -m bench grow --rebalance [--people 100000] [--parallel 2] [--replicas 1] [--steady 20]
                                                    (own MariaDB servers: 3 -> 4 under load)
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from . import (
    backup,
    bulk,
    cache,
    deletion,
    entities,
    failover,
    feed,
    flockdb,
    foundation,
    http,
    journal,
    mysql,
    postgres,
    reads,
    space,
    thrift,
    timelines,
    ttl,
    verify,
    writes,
)
from .linkbench import cli as linkbench

#: name -> (run with these options, options of the quick run-them-all pass)
BENCHMARKS: dict[str, tuple[Callable[[list[str]], None], list[str]]] = {
    "foundation": (lambda args: foundation.main(), []),
    "journal": (lambda args: journal.main(), []),
    "writes": (writes.main, ["--seconds", "1", "--rounds", "1"]),
    "feed": (
        feed.main,
        ["--seconds", "1", "--rounds", "1", "--preload", "20000", "--changes", "20000"],
    ),
    "backup": (backup.main, ["--edges", "50000", "--runs", "1"]),
    "bulk": (bulk.main, ["--edges", "100000", "--runs", "1"]),
    "flockdb": (flockdb.main, ["100000"]),
    "http": (http.main, []),
    "thrift": (thrift.main, ["--seconds", "1"]),
    "cache": (lambda args: cache.main(), []),
    "reads": (reads.main, ["--edges", "20000", "--runs", "2", "--calls", "200", "--no-kuzu"]),
    "space": (space.main, ["--edges", "20000"]),
    "linkbench": (linkbench.main, ["--preset", "tiny"]),
    "mysql": (lambda args: mysql.main(), []),
    "postgres": (lambda args: postgres.main(), []),
    "timelines": (timelines.main, ["--quick"]),
    "entities": (entities.main, ["20000"]),
    "failover": (failover.main, ["1000"]),
    "verify": (verify.main, ["--rows", "20000"]),
    "ttl": (ttl.main, ["--edges", "20000"]),
    "deletion": (deletion.main, ["--edges", "20000", "--runs", "1"]),
}


def _grow(args: list[str]) -> None:
    drill, again = "--drill" in args, "--rebalance" in args
    args = [arg for arg in args if arg not in ("--drill", "--rebalance")]
    options = dict(zip(args[::2], args[1::2], strict=False))
    if again:
        from . import grow_rebalance

        grow_rebalance.main(
            int(options.get("--people", 100_000)),
            int(options.get("--parallel", 2)),
            int(options.get("--replicas", 1)),
            float(options.get("--steady", 20)),
        )
        return
    if drill:
        from . import grow_mysql

        grow_mysql.main(float(options.get("--rate", 150)), float(options.get("--steady", 20)))
        return
    from . import grow_copy

    grow_copy.main(int(options.get("--edges", 200_000)), options.get("--urls", ""))


#: Drills that start servers of their own: run only when named.
DRILLS: dict[str, Callable[[list[str]], None]] = {"grow": _grow}


def main() -> None:
    args = sys.argv[1:]
    if not args:
        for run, quick in BENCHMARKS.values():
            run(quick)
        return
    name, options = args[0], args[1:]
    if name in DRILLS:
        DRILLS[name](options)
        return
    if name not in BENCHMARKS:
        sys.exit(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)}")
    BENCHMARKS[name][0](options)


if __name__ == "__main__":
    main()
