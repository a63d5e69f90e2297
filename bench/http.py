"""HTTP benchmark (issue 4): assoc_range through `assocdb serve`, driven by wrk.

For 1 and 2 server workers, with the cache off and on (each worker its own
256 MiB tier 1): requests/s, p50 and p99 of POST /v1/assoc_range (limit 50,
random people of ego-Facebook) one read per request, and of POST /v1/batch
with 100 such reads per request; next to the same read in-process, cached and
uncached, measured in the same run. wrk (Debian package `wrk`) generates
the load from its own process (it shares the machine's cores with the server).

Run: `python -m bench http [--workers 1,2] [--cache off,on] [--seconds 8]`
(needs wrk on PATH).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

import assocdb
from assocdb.cli.datasets import ego_facebook

SECONDS = 8
CONNECTIONS = 16
PEOPLE = 4039
BATCH_SIZE = 100
CACHE_MB = 256

SINGLE = f"""
local PEOPLE = {PEOPLE}
math.randomseed(7)
request = function()
  local body = '{{"id1": ' .. math.random(1, PEOPLE) .. ', "atype": "friend", "limit": 50}}'
  return wrk.format("POST", "/v1/assoc_range", {{["Content-Type"] = "application/json"}}, body)
end
"""

BATCH = f"""
local PEOPLE = {PEOPLE}
math.randomseed(7)
request = function()
  local reads = {{}}
  for i = 1, {BATCH_SIZE} do
    reads[i] = '{{"method": "assoc_range", "args": {{"id1": ' .. math.random(1, PEOPLE) ..
      ', "atype": "friend", "limit": 50}}}}'
  end
  local body = '{{"requests": [' .. table.concat(reads, ",") .. ']}}'
  return wrk.format("POST", "/v1/batch", {{["Content-Type"] = "application/json"}}, body)
end
"""


def load(directory: Path) -> None:
    with assocdb.open(directory, shards=16) as g:
        g.define_assoc("friend", symmetric=True)
        g.bulk_load((a, "friend", b, n) for n, (a, b) in enumerate(ego_facebook()))


def in_process(directory: Path, cache: assocdb.CacheConfig | None) -> float:
    """µs per assoc_range(limit=50) in this process."""
    with assocdb.open(directory, cache=cache) as g:
        people = [random.Random(3).randrange(1, PEOPLE + 1) for _ in range(5000)]
        for p in people:  # warm up (and fill the cache, if any)
            g.assoc_range(p, "friend", limit=50)
        start = time.perf_counter()
        for p in people:
            g.assoc_range(p, "friend", limit=50)
        return (time.perf_counter() - start) / len(people) * 1e6


def serve(directory: Path, port: int, workers: int, cache_mb: int) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-c",
        "from assocdb.cli.main import main; main()",
        "serve",
        str(directory),
    ]
    server = subprocess.Popen(
        [*command, "--port", str(port), "--workers", str(workers), "--cache-mb", str(cache_mb)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("the server did not start")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of the process `pid` and its descendants so far."""
    total, todo = 0, [pid]
    while todo:
        pid = todo.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:  # gone meanwhile
            continue
        total += int(fields[11]) + int(fields[12])
        todo += [int(child) for child in children]
    return total / os.sysconf("SC_CLK_TCK")


def wrk(port: int, script: Path, seconds: int) -> tuple[float, float, float, int]:
    """requests/s, p50 ms, p99 ms, requests."""
    out = subprocess.run(
        [
            "wrk",
            "-t2",
            f"-c{CONNECTIONS}",
            f"-d{seconds}s",
            "--latency",
            "-s",
            str(script),
            f"http://127.0.0.1:{port}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    return rate, _percentile(out, "50%"), _percentile(out, "99%"), requests


def _percentile(out: str, which: str) -> float:
    found = re.search(rf"\s{which}\s+([\d.]+)(us|ms|s)", out)
    assert found is not None, out
    value, unit = found.groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def _options(args: list[str]) -> tuple[list[int], list[str], int]:
    parser = argparse.ArgumentParser(prog="python -m bench http")
    parser.add_argument("--workers", default="1,2", help="server worker counts, e.g. 1,2")
    parser.add_argument("--cache", default="off,on", help="cache modes: off, on or both")
    parser.add_argument("--seconds", type=int, default=SECONDS, help="wrk run length")
    parsed = parser.parse_args(args)
    caches = parsed.cache.split(",")
    if not set(caches) <= {"off", "on"}:
        parser.error(f"--cache takes off and/or on, not {parsed.cache!r}")
    return [int(w) for w in parsed.workers.split(",")], caches, parsed.seconds


def main(args: list[str] | None = None) -> None:
    workers_list, caches, seconds = _options(args or [])
    if shutil.which("wrk") is None:
        sys.exit("this benchmark needs wrk: apt-get install wrk")
    directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-http-"))
    try:
        load(directory / "graph")
        local = {
            "uncached": in_process(directory / "graph", None),
            "cached": in_process(directory / "graph", assocdb.CacheConfig()),
        }
        scripts = {}
        for name, text in (("single", SINGLE), ("batch", BATCH)):
            scripts[name] = directory / f"{name}.lua"
            scripts[name].write_text(text)
        rows = []
        for workers in workers_list:
            for cache in caches:
                port = 18000 + workers
                server = serve(directory / "graph", port, workers, CACHE_MB if cache == "on" else 0)
                try:
                    wrk(port, scripts["batch"], 3)  # warm up (and fill the caches)
                    for name in ("single", "batch"):
                        before = cpu_seconds(server.pid)
                        rate, p50, p99, requests = wrk(port, scripts[name], seconds)
                        reads = requests * (BATCH_SIZE if name == "batch" else 1)
                        cpu = (cpu_seconds(server.pid) - before) / reads * 1e6
                        rows.append((workers, cache, name, rate, p50, p99, cpu))
                finally:
                    server.terminate()
                    server.wait()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(
        f"http benchmark: assoc_range(limit=50) on ego-Facebook; wrk -t2 -c{CONNECTIONS} "
        f"-d{seconds}s on this 2-core machine (wrk shares it)"
    )
    for cache, micros in local.items():
        print(
            f"in-process assoc_range, {cache}: {micros:.1f} µs per read "
            f"({1e6 / micros:,.0f} reads/s, one thread)"
        )
    print(
        f"{'workers':>7} {'cache':>9} {'requests':>9} {'requests/s':>11} {'reads/s':>9} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'server CPU µs/read':>19}"
    )
    cached = 1e6 / local["cached"]
    for workers, cache, name, rate, p50, p99, cpu in rows:  # cache: off/on
        reads = rate * (BATCH_SIZE if name == "batch" else 1)
        label = f"{BATCH_SIZE} reads" if name == "batch" else "1 read"
        print(
            f"{workers:>7} {cache:>9} {label:>9} {rate:>11,.0f} {reads:>9,.0f}"
            f" {p50:>8.2f} {p99:>8.2f} {cpu:>19.1f}"
        )
        if (workers, cache, name) == (2, "on", "batch"):
            print(
                f"{'':>7} target: >= 100,000 reads/s ({reads / 100_000:.2f}x of it); "
                f"{reads / cached:.2f}x the in-process cached reads/s of one thread"
            )


if __name__ == "__main__":
    main()
