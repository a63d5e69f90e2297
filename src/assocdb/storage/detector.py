"""The failure detector of one backend: a pure state machine, time passed in.

    UP ──(threshold consecutive failures)──> DOWN ──(probe succeeds)──> UP
                                              │ ▲
                                              └─┘ probe fails: next probe waits twice as long

While UP, every call is sent and a success resets the run of failures. While
DOWN, no work is sent (callers fail over or queue at once, without waiting
for a timeout); the shell runs a cheap probe whenever `probe_due` says so,
with the probe interval doubling from `probe_interval` up to `probe_max`
while the backend stays down. An operator's drain (`drained`) keeps a
backend DOWN whatever its probes say.

No clock, no threads, no I/O here: the shell (`storage.shardmap`) passes `now` in
and serializes calls, so the transitions are unit-tested exactly.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Health:
    """What the detector knows about one backend."""

    threshold: int = 3
    probe_interval: float = 0.5
    probe_max: float = 10.0
    up: bool = True
    drained: bool = False
    consecutive: int = 0  # failures in a row (reset by a success)
    failures: int = 0  # failures since start
    downs: int = 0  # times marked down since start
    down_since: float | None = None
    next_probe: float = 0.0
    interval: float = 0.0  # the current probe interval

    def allows(self) -> bool:
        """May work be sent to the backend now?"""
        return self.up and not self.drained

    def succeeded(self) -> None:
        """A call (not a probe) succeeded."""
        self.consecutive = 0

    def failed(self, now: float) -> bool:
        """A call failed for availability; True if this failure marked the backend down."""
        self.failures += 1
        self.consecutive += 1
        if self.up and self.consecutive >= self.threshold:
            self._go_down(now)
            return True
        return False

    def probe_due(self, now: float) -> bool:
        """Should the shell probe the backend now?"""
        return not self.up and not self.drained and now >= self.next_probe

    def probed(self, ok: bool, now: float) -> bool:
        """Record a probe's outcome; True if it brought the backend back up."""
        if ok and not self.drained:
            self.up, self.consecutive, self.down_since = True, 0, None
            return True
        if not ok:
            self.failures += 1
            self.interval = min(self.probe_max, self.interval * 2)
            self.next_probe = now + self.interval
        return False

    def drain(self, drained: bool, now: float) -> None:
        """An operator takes the backend out of service (True) or gives it back (False).

        Given back, it is probed at once and serves again when the probe passes.
        """
        self.drained = drained
        if drained and self.up:
            self._go_down(now)
        elif not drained and not self.up:
            self.next_probe = now

    def mark(self, up: bool, now: float) -> None:
        """Force the state (an operator's mark-down / mark-up in this process)."""
        if up:
            self.up, self.consecutive, self.down_since = True, 0, None
        elif self.up:
            self._go_down(now)

    def _go_down(self, now: float) -> None:
        self.up = False
        self.downs += 1
        self.down_since = now
        self.interval = self.probe_interval
        self.next_probe = now + self.interval
