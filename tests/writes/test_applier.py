"""The applier's fence (`Applier.fence`): when applied jobs are made durable."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import assocdb
from assocdb.writes import fence as fence_module
from tests.support.helpers import wait_until


class _Waits(threading.Event):
    """The retrier's wake-up event, recording how long each of its sleeps may last."""

    def __init__(self) -> None:
        super().__init__()
        self.pauses: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.pauses.append(timeout)
        return super().wait(timeout)


def test_a_write_wakes_the_fence_of_an_idle_retrier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle retrier sleeps up to a second; the first write applied after a fence
    wakes it, and it sleeps no more than FENCE_SECONDS before fencing that write
    (shorter here than the idle sleep, so that a retrier left asleep fails)."""
    monkeypatch.setattr(fence_module, "FENCE_SECONDS", 0.2)
    with assocdb.open(tmp_path / "g", shards=2) as g:
        g.define_assoc("follows")
        applier = g.engine.applier
        waits = applier._wake = _Waits()  # the retrier's next sleep is recorded
        wait_until(lambda: waits.pauses[-1:] == [1.0])  # idle: asleep on the new event
        asleep = len(waits.pauses)
        assert g.assoc_add(1, "follows", 2).status == "applied"
        wait_until(lambda: applier.unfenced() == 0)
        woken = waits.pauses[asleep]  # the sleep after the write woke the retrier
        assert woken is not None
        assert woken <= 0.2
