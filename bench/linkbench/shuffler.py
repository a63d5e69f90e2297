"""LinkBench's `InvertibleShuffler`: a cheap, seeded, invertible permutation of [0, n).

Distributions rank ids from most to least popular (rank 0 is the hottest);
a shuffler scatters the ranks over the id space so that hot ids are not all
small. LinkBench builds every shuffler from a fixed seed, so the *same ids*
are hot in every run and in every port that shuffles exactly this way.

The ids are dealt into `groups` residue classes (i mod groups); each class
is a ring that is rotated by its own offset, drawn with `nextInt` from a
`java.util.Random` seeded with the fixed seed. Classes with one member more
than the others ("big groups") wrap at a different length. Inverting the
rotation inverts the permutation.
"""

from __future__ import annotations

from .jrandom import JavaRandom

#: The seeds and group counts of the reference (RealDistribution.java).
NLINKS_SEED = 20343988438726021
UNCORR_SEED = 53238253823453
NODE_SEED = 4766565305853767165
GROUPS = 1024


class InvertibleShuffler:
    """`permute(i)` maps rank i to a position; `invert(j)` maps it back."""

    def __init__(self, seed: int, groups: int, n: int) -> None:
        if n <= 0:
            raise ValueError(f"nothing to shuffle: n = {n}")
        groups = min(groups, n)  # no more groups than items
        rng = JavaRandom(seed)
        self.n = n
        self.groups = groups
        self.min_group_size = n // groups
        self.params = [abs(rng.next_int_bounded(self.min_group_size)) for _ in range(groups)]
        self.rounded_down = (n // groups) * groups
        self.rounded_up = n if n == self.rounded_down else self.rounded_down + groups
        self._big_groups = n % groups

    def permute(self, i: int, inverse: bool = False) -> int:
        n = self.n
        if not 0 <= i < n:
            raise ValueError(f"bad index to permute: {i} is outside [0, {n})")
        group = i % self.groups
        big = group < self._big_groups
        rotate = self.params[group]
        if inverse:
            rotate = (self.min_group_size + 1 if big else self.min_group_size) - rotate
        j = i + self.groups * rotate
        if j < n:
            return j
        result = j % (self.rounded_up if big else self.rounded_down)
        return group if result >= n else result

    def invert(self, j: int) -> int:
        return self.permute(j, inverse=True)
