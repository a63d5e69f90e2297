"""HotKeys: the Space-Saving summary in buckets keeps its invariants at O(1) a count."""

from __future__ import annotations

import random

from assocdb.cache.hotkeys import HotKeys


def check(hot: HotKeys, counted: int, capacity: int) -> None:
    counts = hot._counts
    assert len(counts) <= capacity
    assert sum(counts.values()) == counted  # Space-Saving never loses a count
    assert hot._smallest == min(counts.values())
    assert {k: c for c, keys in hot._buckets.items() for k in keys} == counts
    assert all(hot._buckets.values())  # no empty bucket left behind


def test_the_summary_keeps_its_invariants_and_finds_heavy_hitters() -> None:
    rng = random.Random(3)
    hot = HotKeys(capacity=16, sample=1)
    for n in range(1, 5001):
        key = rng.choice(["a", "b", "c"]) if rng.random() < 0.5 else rng.randrange(1000)
        hot.seen(key)
        if n % 97 == 0:
            check(hot, n, 16)
    top = [key for key, _ in hot.top(3)]
    assert sorted(top, key=str) == ["a", "b", "c"]


def test_a_new_key_takes_over_a_smallest_counter() -> None:
    hot = HotKeys(capacity=2, sample=1)
    for key in ["x", "x", "x", "y", "z"]:
        hot.seen(key)
    assert hot._counts == {"x": 3, "z": 2}  # z inherited y's 1, plus its own
    check(hot, 5, 2)


def test_a_repeating_pattern_of_lookups_is_sampled_at_every_phase() -> None:
    hot = HotKeys(sample=16)
    hot._gaps.seed(5)
    for _ in range(16_000):  # a list read, then an object read, over and over
        hot.seen(("list", 1, 1))
        hot.seen(("object", 1))
    rates = dict(hot.top(2))
    assert set(rates) == {("list", 1, 1), ("object", 1)}  # a fixed period saw only one
    assert 0.8 < rates[("list", 1, 1)] / rates[("object", 1)] < 1.25
