"""A disk that fills up and frees again, over and over, under concurrent writes.

The graph and its journal live on a small tmpfs (mounted here, so this runs
as root and skips elsewhere). Writers add edges with an inverse type while a
filler takes every free byte and gives it back, at least ten times. Whatever
was acknowledged (`applied` or `queued`) must be there afterwards, with its
inverse and exact counts; a write the journal could not record must have been
refused (`Unavailable`); and the shards must come back once space returns.
"""

from __future__ import annotations

import os
import random
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import assocdb
from assocdb import Graph, Unavailable
from assocdb.writes.applier import RetryPolicy

CYCLES = 10
FAST = RetryPolicy(base=0.005, cap=0.05, down_after=2, down_for=0.02, down_max=0.1)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


class Load:
    """Writers that record what was acknowledged, and counters to wait on."""

    def __init__(self, graph: Graph, threads: int = 4) -> None:
        self.graph = graph
        self.acked: list[tuple[int, int]] = []
        self.refused = 0
        self.applied = 0
        self.queued = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._write, args=(n,)) for n in range(threads)]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()

    def _write(self, seed: int) -> None:
        rnd = random.Random(seed)
        while not self.stop.is_set():
            id1, id2 = rnd.randrange(1, 500), rnd.randrange(1, 10**9)
            try:
                result = self.graph.assoc_add(id1, "follows", id2, data="x" * rnd.randrange(200))
            except Unavailable:
                with self.lock:
                    self.refused += 1
                continue
            with self.lock:
                self.acked.append((id1, id2))
                if result.status == "applied":
                    self.applied += 1
                else:
                    self.queued += 1

    def wait(self, enough: Callable[[], bool], patience: float = 120.0) -> None:
        """Until `enough()` holds (the writers make progress whatever the disk does).

        `patience` only turns a hang into a failure; nothing waits for it.
        """
        give_up = time.monotonic() + patience
        while not enough():
            assert all(t.is_alive() for t in self.threads), "a writer died"
            assert time.monotonic() < give_up, "no progress"
            time.sleep(0.005)


def fill(mount: Path) -> Path:
    """Take every free byte of the disk."""
    filler = mount / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:  # ENOSPC: the disk is full
            pass
    return filler


def test_a_disk_that_fills_and_frees_loses_nothing_acknowledged(small_disk: Path) -> None:
    g = assocdb.open(small_disk / "g", shards=2, timeout=0.5, retry=FAST)
    g.define_assoc("follows", inverse="followed_by")
    with Load(g) as load:
        for _ in range(CYCLES):
            hit_the_wall = load.refused + load.queued + 60
            filler = fill(small_disk)
            load.wait(lambda w=hit_the_wall: load.refused + load.queued >= w)
            filler.unlink()
            got_through = load.applied + 60
            load.wait(lambda w=got_through: load.applied >= w)
        # Every shard is back soon after the space (cool-downs end within down_max).
        load.wait(lambda: g.queue_stats().down_shards == [], patience=10.0)
    assert load.refused > 0
    assert load.queued > 0
    g.close()

    g = assocdb.open(small_disk / "g")
    while g.queue_stats().depth:
        g.queue_retry()
        g.drain(timeout=5)
    missing = [
        (id1, id2)
        for id1, id2 in load.acked
        if not g.assoc_get(id1, "follows", [id2]) or not g.assoc_get(id2, "followed_by", [id1])
    ]
    assert missing == []
    assert g.check_counts() == []
    g.close()
