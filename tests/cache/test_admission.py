"""The doorkeeper (`cache.admission`): a key is admitted on its admit_after-th recent miss,
and it remembers between SIZE / 2 and SIZE recent keys, at a constant cost a miss, in a
sketch (a key may share a counted slot, and be admitted a miss early)."""

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
    counted = set()
    for n in range(3 * SIZE):
        if door.passing(key(n)):  # (else it shares a slot with a counted key)
            counted.add(n)
        assert len(door) <= SIZE
        then = n - SIZE // 2 + 1
        if n >= SIZE // 2 and n % 97 == 0 and then in counted:
            # The key missed SIZE / 2 - 1 misses ago is still remembered.
            assert door._seen(key(then)) >= 1
    # Long forgotten, but for the few whose slot a recent key shares.
    assert sum(door._seen(key(n)) > 0 for n in range(SIZE)) < SIZE // 10
    forgotten = next(n for n in range(SIZE) if not door._seen(key(n)))
    door.readmit(key(forgotten))
    assert not door.passing(key(forgotten))


def test_a_new_key_is_seldom_taken_for_one_missed() -> None:
    door = Doorkeeper(2)
    for n in range(SIZE // 2 - 1):
        door.passing(key(n))
    early = sum(not door.passing(key(SIZE + n)) for n in range(10_000))
    assert early < 10_000 * 0.1  # admitted on its first miss: its slot was counted
