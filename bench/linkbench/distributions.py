"""LinkBench's probability distributions over ids and sizes, drawing as Java does.

Each `choose(rng)` consumes exactly the random numbers the reference's
consumes, in the same order, so a seeded stream of requests is the same:

* `Zipf(min, max, shape)`: Gray et al.'s quantile method ("Quickly
  generating billion-record synthetic databases", 1994): `zetan` is the
  generalised harmonic number summed from `n` down to 1 (the order matters
  to the last bit), and one `nextDouble` picks a rank; rank 0 (`min`) is the
  most popular. The ranks are later scattered over the ids by a shuffler.
* `Uniform(min, max)`: one `nextInt(n)`.
* `Geometric(min, max, p)`: `min + ceil(log(1 - r) / log(1 - p))`, truncated
  below `max` (so LinkBench's multiget sizes are 2..127 with min = 1 and
  max = 128: the ceiling is already >= 1, a reference quirk).
* `LogNormal(min, max, median, sigma)`: `round(exp(gaussian * sigma + mu))`,
  clamped to [min, max).

The reference uses commons-math's `FastMath.pow/log/exp`, which round
differently from the C library in about 0.1% of calls, by one ulp. An
integer result can only change when the value lies within that ulp of a
rounding boundary, which we estimate at below one draw in a billion.
"""

from __future__ import annotations

import math
from functools import lru_cache

from .jrandom import JavaRandom, java_round


@lru_cache(maxsize=32)
def generalized_harmonic(n: int, m: float) -> float:
    """Sum of 1/k^m for k = n down to 1, in that order (as the reference sums it)."""
    value = 0.0
    pow_ = math.pow
    for k in range(n, 0, -1):
        value += 1.0 / pow_(k, m)
    return value


class Zipf:
    """Zipf over [min, max): `min` is the most likely value."""

    def __init__(self, min_id: int, max_id: int, shape: float) -> None:
        if max_id <= min_id:
            raise ValueError(f"empty range [{min_id}, {max_id})")
        if shape <= 0:
            raise ValueError(f"the Zipf shape must be positive, got {shape}")
        self.min, self.max, self.shape = min_id, max_id, shape
        n = self.n = max_id - min_id
        self.alpha = 1 / (1 - shape)
        self.zetan = generalized_harmonic(n, shape)
        self.eta = (1 - math.pow(2.0 / n, 1 - shape)) / (
            1 - generalized_harmonic(2, shape) / self.zetan
        )
        self.point5theta = math.pow(0.5, shape)

    def quantile(self, p: float) -> int:
        uz = p * self.zetan
        if uz < 1:
            return self.min
        if uz < 1 + self.point5theta:
            return self.min + 1
        offset = int(self.n * math.pow(self.eta * p - self.eta + 1, self.alpha))
        return self.max - 1 if offset >= self.n else self.min + offset

    def choose(self, rng: JavaRandom) -> int:
        return self.quantile(rng.next_double())


class Uniform:
    """Uniform over [min, max)."""

    def __init__(self, min_id: int, max_id: int) -> None:
        if max_id <= min_id:
            raise ValueError(f"empty range [{min_id}, {max_id})")
        if max_id - min_id > 2**31 - 1:
            raise ValueError("ranges wider than 2^31 - 1 are not supported")
        self.min, self.max = min_id, max_id

    def choose(self, rng: JavaRandom) -> int:
        return self.min + rng.next_int_bounded(self.max - self.min)


class Geometric:
    """Geometric with success probability `p`, truncated below `max`.

    The reference adds `min` to a quantile that is already >= 1 for r > 0,
    so its values start at min + 1 (quirk 5); `from_min=True` starts at min.
    """

    def __init__(self, min_v: int, max_v: int, p: float, from_min: bool = False) -> None:
        self.min, self.max, self.p = min_v, max_v, p
        self._log1mp = math.log(1 - p)
        self._shift = -1 if from_min else 0

    def quantile(self, r: float) -> int:
        if r == 0.0:
            return self.min
        x = self.min + self._shift + math.ceil(math.log(1 - r) / self._log1mp)
        return min(x, self.max - 1)

    def choose(self, rng: JavaRandom) -> int:
        return self.quantile(rng.next_double())


class LogNormal:
    """Log-normal with the given median and log-sigma, rounded and clamped to [min, max)."""

    def __init__(self, min_v: int, max_v: int, median: float, sigma: float) -> None:
        self.min, self.max, self.sigma = min_v, max_v, sigma
        self.mu = math.log(median)

    def choose(self, rng: JavaRandom) -> int:
        choice = java_round(math.exp(rng.next_gaussian() * self.sigma + self.mu))
        if choice < self.min:
            return self.min
        return self.max - 1 if choice >= self.max else choice
