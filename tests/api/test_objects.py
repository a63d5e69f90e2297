"""Allocated ids (`api/objects.py`): reserved in blocks that grow with the rate."""

from __future__ import annotations

from assocdb.api.objects import GROW_SECONDS, SHRINK_SECONDS, block_size


def test_a_block_used_up_quickly_makes_the_next_one_larger() -> None:
    assert block_size(0, float("inf"), 64, 4096) == 64  # the first block
    assert block_size(64, 0.5, 64, 4096) == 128
    assert block_size(4096, 0.5, 64, 4096) == 4096  # at most the largest
    assert block_size(256, GROW_SECONDS + 1, 64, 4096) == 256
    assert block_size(256, SHRINK_SECONDS + 1, 64, 4096) == 128
    assert block_size(64, SHRINK_SECONDS + 1, 64, 4096) == 64
