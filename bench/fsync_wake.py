"""What a durable commit waits for on this machine: the disk, or the CPU waking up.

    python -m bench.fsync_wake [--preload N] [--blocks B] [--writes W]

Commits the bare same-work write (`bench.writes.Bare`: edge, inverse edge, two
count upserts, one fsynced COMMIT) one at a time, in blocks of W, alternating
blocks alone with blocks while another process spins on a core (a busy loop,
no I/O), and prints each side's p50 and mean latency. On the 2-core VM this
was built on, at times the fsync's completion is noticed only at the next
timer tick (4 ms) when no thread keeps a virtual CPU busy: the same commit
took p50 4,000 µs alone and 1,222 µs beside the spinner (issue 37). A write
path whose own threads are busy while its fsync is in flight (a helper thread
filling the shards while the writer commits the journal, `writes/overlap.py`)
is woken sooner than one that sleeps in it.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .writes import Bare


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fsync_wake")
    parser.add_argument("--preload", type=int, default=100_000)
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--writes", type=int, default=100)
    options = parser.parse_args(args)
    directory = Path(tempfile.mkdtemp(prefix="assocdb-bench-fsync-wake-"))
    seconds: dict[str, list[float]] = {"alone": [], "beside a spinning process": []}
    try:
        bare = Bare(directory / "bare.db")
        bare.preload(options.preload, random.Random(2))
        rnd = random.Random(3)
        for block in range(options.blocks):
            spinner = None
            if block % 2:
                spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                time.sleep(0.2)  # (started)
            side = seconds["beside a spinning process" if spinner else "alone"]
            try:
                for _ in range(options.writes):
                    started = time.perf_counter()
                    bare.commit(rnd, 1)
                    side.append(time.perf_counter() - started)
            finally:
                if spinner is not None:
                    spinner.kill()
                    spinner.wait()
        bare.conn.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(f"bare same-work commits, {options.blocks} alternating blocks of {options.writes}, µs:")
    for name, values in seconds.items():
        print(
            f"  {name:<28} p50 {statistics.median(values) * 1e6:>7.0f}"
            f"  mean {statistics.mean(values) * 1e6:>7.0f}"
        )


if __name__ == "__main__":
    main()
