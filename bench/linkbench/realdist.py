"""The empirical distributions of `Distribution.dat` and the load-phase out-degrees.

The file (LinkBench's `config/Distribution.dat`, Apache License 2.0) has
sections `nlinks`, `link_nreads`, `link_nwrites`, `node_nreads` and
`node_nwrites`, each a list of `value cumulative_percent` lines. `nlinks` is
the out-degree distribution of Facebook's graph.

Out-degrees are assigned by rank: rank r of n ids sits at percentile
`u = 1 - r / n` and gets the value of the first point whose cumulative
probability is >= u (no interpolation, as the reference). So rank 0 always
gets the largest value in the file, 961,963 links, however few ids there
are: the distribution does not scale down.
"""

from __future__ import annotations

import bisect
from functools import lru_cache
from pathlib import Path

DATA_FILE = Path(__file__).with_name("Distribution.dat")


@lru_cache(maxsize=4)
def load_cdfs(path: Path = DATA_FILE) -> dict[str, tuple[list[int], list[float]]]:
    """Every section of the file as (values, cumulative probabilities in [0, 1])."""
    sections: dict[str, tuple[list[int], list[float]]] = {}
    values: list[int] = []
    probs: list[float] = []
    for line in path.read_text(encoding="ascii").splitlines():
        fields = line.split()
        if not fields:
            continue
        if len(fields) == 1:  # a section name
            values, probs = [], []
            sections[fields[0]] = (values, probs)
            continue
        values.append(int(fields[0]))
        probs.append(float(fields[1]) / 100)  # the file holds percentages
    return sections


class NLinks:
    """Out-degree by rank over ids [start, end), from the `nlinks` section."""

    def __init__(self, start: int, end: int, path: Path = DATA_FILE) -> None:
        self.start, self.n = start, end - start
        self._values, self._probs = load_cdfs(path)["nlinks"]

    def expected(self, rank_id: int) -> int:
        """The out-degree of the id ranked `rank_id - start` (0 = the biggest hub)."""
        if not 0 <= rank_id - self.start < self.n:
            return 0
        u = 1.0 - (rank_id - self.start) / self.n
        # The first point with cumulative probability >= u (Java's hand-written search).
        return self._values[bisect.bisect_left(self._probs, u)]
