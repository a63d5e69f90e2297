"""Whether `assoc_get` asks the cache at all: it pays only when its hits save more than
its misses cost (issue 43).

An assoc_get is answered by the cache only from a whole small list (a probe of its
packed prefix, or a hot list's index by id2); it never fills. On popularity-weighted
traffic most of its lists are long or not cached, so most gets pay a lookup for
nothing (~2-3 µs in context, ~3% of the shard's read), and a hit probing a packed
prefix saved about nothing against the shard (`bench reads`, which of 10: hits 11-15%,
on/off p50 1.07-1.10x). So the gate times its own gets, one in SAMPLE (perf_counter
around the cache's answer, or around the lookup and the shard's read of a miss), and
every WINDOW timed gets weighs what the hits saved (hits x (miss - hit) mean times)
against what the misses' lookups cost (PASS of a miss's time each). When the hits
lost, gets stop asking the cache (`open` False): an assoc_get is then the uncached
read, but one in CLOSED_SAMPLE, which asks and is timed; when those say hits pay
again, the gate opens. Skipping the cache never changes an answer: the shard's is
always right. Counting takes no lock: a lost count moves a verdict, never an answer.
"""

from __future__ import annotations

SAMPLE = 16  # while open, one get in SAMPLE is timed
CLOSED_SAMPLE = 64  # while closed, one get in CLOSED_SAMPLE asks the cache, timed
WINDOW = 128  # timed gets a verdict is made on
PASS = 0.03  # what a miss's cache lookup costs, of the miss's time


class GetGate:
    """Open: gets ask the cache; closed: they read the shard, but for a sample."""

    __slots__ = ("enabled", "hit_n", "hit_s", "miss_n", "miss_s", "open", "skip", "why")

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled  # False: verdicts are not made, gets always ask
        self.open = True
        self.skip = SAMPLE
        self.why = ""
        self.hit_n = self.miss_n = 0
        self.hit_s = self.miss_s = 0.0

    def timed(self) -> bool:
        """Whether this get is a timed one (no lock)."""
        self.skip -= 1
        if self.skip > 0:
            return False
        self.skip = SAMPLE if self.open else CLOSED_SAMPLE
        return True

    def hit(self, seconds: float) -> None:
        self.hit_n += 1
        self.hit_s += seconds
        self._judge()

    def missed(self, seconds: float) -> None:
        self.miss_n += 1
        self.miss_s += seconds
        self._judge()

    def _judge(self) -> None:
        n = self.hit_n + self.miss_n
        if n < WINDOW:
            return
        if self.enabled and self.miss_n:
            miss = self.miss_s / self.miss_n
            hit = self.hit_s / self.hit_n if self.hit_n else miss
            saved = self.hit_n * (miss - hit)
            cost = self.miss_n * PASS * miss
            self.open = saved >= cost
            if not self.open:
                self.why = (
                    f"{self.hit_n} hits of {n} gets saved {saved * 1e6:.0f} µs, their misses'"
                    f" lookups cost ~{cost * 1e6:.0f} µs (hit {hit * 1e6:.1f} µs,"
                    f" miss {miss * 1e6:.1f} µs)"
                )
        self.hit_n = self.miss_n = 0
        self.hit_s = self.miss_s = 0.0
