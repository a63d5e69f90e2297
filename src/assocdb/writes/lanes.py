"""The pipeline's low lane: background work that gives way to client writes.

A cascading deletion removes its edges through the write pipeline like any
write, but a client should not wait for it: merged into the cascade's batches
of 100, another client's lone write took the time of those 100 (its p50 went
x9 during a cascade). So background writes wait in their own lane, never share
a batch with client writes, and go through `SLICE` at a time, and the two
lanes share the pipeline's time:

* while the low lane has had at least the clients' time (its `share`, the
  seconds it ran minus the seconds client batches ran while it waited, is >= 0),
  client writes go first, and after a client batch the pipeline waits up to
  `GRACE` for the next client write before it takes a slice (a client that got
  its answer usually writes again at once);
* once the clients have had more, the next batch is a slice, whoever waits.

So a client write waits for one slice at most, most wait for none, and the
background work gets half the pipeline's time however busy the clients are.
The share is bounded (`LIMIT`): a lane that ran alone for a while (the
cascade on a quiet store) is not owed a long burst afterwards.

Pure bookkeeping: the pipeline calls it holding its lock.
"""

from __future__ import annotations

from typing import Generic, TypeVar

#: Background writes carried through together: what a client write may wait behind
#: (64 edge removals: 2-4 ms on a quiet machine).
SLICE = 64
#: How long a slice waits, after a client batch, for the next client write.
GRACE = 0.001
#: The share's bound, either way (seconds).
LIMIT = 0.01

T = TypeVar("T")


class LowLane(Generic[T]):
    """The low lane's waiting writes, and its share of the pipeline's time."""

    def __init__(self) -> None:
        self.waiting: list[T] = []
        self.share = 0.0
        self._client_ended = float("-inf")  # when the last client batch ended (monotonic)

    def owed(self) -> bool:
        """Whether the next batch must be a slice: clients had more than their share."""
        return bool(self.waiting) and self.share < 0

    def grace(self, now: float) -> float:
        """Seconds to wait yet for a client write before taking a slice (0: take it)."""
        if not self.waiting or self.share < 0:
            return 0.0
        return max(0.0, self._client_ended + GRACE - now)

    def take(self) -> list[T]:
        """The next slice (in the order the writes entered)."""
        batch, self.waiting = self.waiting[:SLICE], self.waiting[SLICE:]
        return batch

    def ran(self, seconds: float, low: bool, now: float) -> None:
        """A batch of `seconds` went through: a slice (`low`) or client writes."""
        if not low:
            self._client_ended = now
            if not self.waiting:  # nothing gave way to it
                return
        share = self.share + (seconds if low else -seconds)
        self.share = min(LIMIT, max(-LIMIT, share))
