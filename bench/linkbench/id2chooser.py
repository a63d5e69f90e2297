"""Which id2 an operation touches, and how many links each id1 was loaded with.

The load gives id1 the links `id1, id1 + 1, ..., id1 + n - 1` of each type,
where n is its share of the out-degree its *rank* draws from `nlinks`
(`invert` of the nlinks shuffler turns the id back into its rank). A request
that wants to hit an existing link with probability p draws id2 uniformly
from `id1 + [0, ceil(n / p))`: adds use p = 0.05 (mostly new links),
updates and deletes 0.9, multigets 0.5. So the generator knows which links
exist without asking the store.
"""

from __future__ import annotations

import math

from .config import DEFAULT_LINK_TYPE, Workload
from .jrandom import JavaRandom
from .realdist import NLinks
from .shuffler import GROUPS, NLINKS_SEED, InvertibleShuffler

P_GET_EXIST = 0.5
P_UPDATE_EXIST = 0.9
P_DELETE_EXIST = 0.9
P_ADD_EXIST = 0.05
MAX_UNIQ_ITERS = 100


class Id2Chooser:
    """Out-degrees per (id1, type) and id2 choices, as the reference's `ID2Chooser`."""

    def __init__(self, workload: Workload) -> None:
        self.start, self.end = workload.startid1, workload.maxid1
        self.types = workload.link_type_count
        self.quirks = workload.quirks
        self._nlinks = NLinks(self.start, self.end)
        self._shuffler = InvertibleShuffler(NLINKS_SEED, GROUPS, self.end - self.start)

    def link_types(self) -> list[int]:
        return [DEFAULT_LINK_TYPE + i for i in range(self.types)]

    def random_link_type(self, rng: JavaRandom) -> int:
        return DEFAULT_LINK_TYPE + rng.next_int_bounded(self.types)

    def total_link_count(self, id1: int) -> int:
        """The out-degree drawn for id1 (before it is split over the link types)."""
        rank = self.start + self._shuffler.invert(id1 - self.start)
        return self._nlinks.expected(rank)

    def link_count(self, id1: int, link_type: int) -> int:
        """How many links of this type the load gave id1."""
        total = self.total_link_count(id1)
        share = total // self.types
        # Quirk 1: the reference computes the remainder as total - share.
        left_over = total - share if self.quirks else total % self.types
        return share + 1 if link_type - DEFAULT_LINK_TYPE < left_over else share

    def _range(self, p_existing: float, nlinks: int) -> int:
        return max(1, math.ceil((1 / p_existing) * nlinks))

    def choose_for_op(self, rng: JavaRandom, id1: int, link_type: int, p_existing: float) -> int:
        span = self._range(p_existing, self.link_count(id1, link_type))
        return id1 + rng.next_int_bounded(span)

    def choose_multiple_for_op(
        self, rng: JavaRandom, id1: int, link_type: int, count: int, p_existing: float
    ) -> list[int]:
        """`count` id2s, distinct where the range allows (up to 100 tries each)."""
        span = self._range(p_existing, self.link_count(id1, link_type))
        if span <= count:
            return [id1 + i for i in range(count)]
        id2s: list[int] = []
        for _ in range(count):
            iters = 0
            while True:
                id2 = id1 + rng.next_int_bounded(span)
                iters += 1
                if id2 not in id2s or iters > MAX_UNIQ_ITERS:
                    break
            id2s.append(id2)
        return id2s
