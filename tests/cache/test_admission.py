"""The doorkeeper (`cache.admission`): a key is admitted on its admit_after-th recent miss,
and it remembers between SIZE / 2 and SIZE recent keys, at a constant cost a miss."""

from __future__ import annotations

from assocdb.cache.admission import SIZE, Doorkeeper
from assocdb.core.cachekeys import PREFIX


def key(n: int) -> tuple[str, tuple[int, int]]:
    return (PREFIX, (n, 1))


def test_a_key_is_admitted_on_its_second_recent_miss() -> None:
    door = Doorkeeper(2)
    assert door.passing(key(1))
    assert not door.passing(key(1))  # the second: `admits` counts it
    assert door.admits(key(1))
    assert not door.admits(key(2))
    assert door.admits(key(2))
    assert not door.admits(key(2))  # admitted: its count restarted


def test_it_remembers_at_least_half_its_size_and_at_most_its_size() -> None:
    door = Doorkeeper(2)
    for n in range(3 * SIZE):
        assert door.passing(key(n))
        assert len(door) <= SIZE
        if n >= SIZE // 2:
            # The key missed SIZE / 2 - 1 misses ago is still remembered.
            assert door._seen(key(n - SIZE // 2 + 1)) == 1
    assert door._seen(key(0)) == 0  # long forgotten
    door.readmit(key(0))
    assert not door.passing(key(0))
