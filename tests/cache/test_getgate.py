"""assoc_get asks the cache only while its hits pay for its misses' lookups
(`cache.getgate`): timed gets, one in SAMPLE, weigh what hits saved against what the
misses' lookups cost; closed, a get reads the shard, but one in CLOSED_SAMPLE."""

from __future__ import annotations

from pathlib import Path

import assocdb
from assocdb import CacheConfig
from assocdb.cache.getgate import CLOSED_SAMPLE, PASS, SAMPLE, WINDOW, GetGate
from tests.support.helpers import statements


def test_misses_without_hits_close_the_gate_and_hits_that_pay_reopen_it() -> None:
    gate = GetGate()
    for _ in range(WINDOW):
        gate.missed(100e-6)
    assert not gate.open
    assert "0 hits of 128 gets" in gate.why
    assert sum(gate.timed() for _ in range(10 * CLOSED_SAMPLE)) == 10
    for _ in range(WINDOW // 2):  # half the gets hit, at a tenth of a miss's time
        gate.hit(10e-6)
        gate.missed(100e-6)
    assert gate.open
    assert sum(gate.timed() for _ in range(10 * SAMPLE)) == 10


def test_hits_that_save_less_than_the_lookups_cost_close_it() -> None:
    gate = GetGate()
    hits = 8  # each saves 10% of a miss; the misses' lookups cost PASS of one each
    assert hits * 0.1 < (WINDOW - hits) * PASS
    for n in range(WINDOW):
        if n < hits:
            gate.hit(90e-6)
        else:
            gate.missed(100e-6)
    assert not gate.open


def test_it_can_be_turned_off() -> None:
    gate = GetGate(enabled=False)
    for _ in range(3 * WINDOW):
        gate.missed(100e-6)
    assert gate.open


def test_a_closed_gate_reads_the_shard_and_a_write_is_seen(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(admit_after=1, max_age=3600))
    g.define_assoc("likes")
    g.bulk_load([(n, "likes", m, m) for n in range(1, 5) for m in range(1, 11)])
    cache = g.engine.cache
    assert cache is not None
    g.assoc_range(1, "likes", 0, 50)  # list 1 cached whole
    cache.gets.skip = 10**9  # (no timed get below)
    assert statements(g, lambda: g.assoc_get(1, "likes", [3, 4])) == []  # open: a hit
    cache.gets.open = False
    stats = g.cache_stats()
    assert stats is not None
    assert stats.gets_open is False
    assert len(statements(g, lambda: g.assoc_get(1, "likes", [3, 4]))) == 1  # the shard
    g.assoc_add(1, "likes", 99, time=100)
    assert [a.id2 for a in g.assoc_get(1, "likes", [99, 3])] == [99, 3]
    cache.gets.open = True
    assert statements(g, lambda: g.assoc_get(1, "likes", [99, 3])) == []  # the entry kept up
    assert [a.id2 for a in g.assoc_get(1, "likes", [99, 3])] == [99, 3]
    g.close()
