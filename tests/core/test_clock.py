from __future__ import annotations

import pytest

from assocdb import InvalidRequest
from assocdb.core.clock import MAX_FUTURE_US, HybridClock


def test_strictly_increasing_even_when_the_wall_clock_steps_back() -> None:
    wall = [5_000_000_000]
    clock = HybridClock(lambda: wall[0])
    a = clock.now()
    wall[0] -= 1_000_000_000  # NTP steps back a second
    b = clock.now()
    c = clock.now()
    assert a < b < c


def test_follows_the_wall_clock_in_microseconds() -> None:
    clock = HybridClock(lambda: 7_000_123_456)
    assert clock.now() == 7_000_123


def test_observed_timestamps_are_never_undercut() -> None:
    clock = HybridClock(lambda: 1_000_000)
    clock.observe(5_000)
    assert clock.now() == 5_001


def test_accepts_client_timestamps_and_observes_them() -> None:
    clock = HybridClock(lambda: 10_000_000_000)
    assert clock.accept(10_000_000 + 5) == 10_000_005
    assert clock.now() > 10_000_005


@pytest.mark.parametrize("bad", [0, -5, 1.5, "12", None, True, 2**63])
def test_refuses_malformed_timestamps(bad: object) -> None:
    with pytest.raises(InvalidRequest, match="updated_at"):
        HybridClock().accept(bad)


def test_refuses_timestamps_far_in_the_future() -> None:
    clock = HybridClock(lambda: 10_000_000_000)
    with pytest.raises(InvalidRequest, match="future"):
        clock.accept(10_000_000 + MAX_FUTURE_US + 1)
