"""Which id1 a request touches: Zipf ranks, blended and shuffled as the reference does.

Each kind of access has a distribution over *ranks* and a shuffler that
scatters ranks over the ids:

* link reads: Zipf(0.8), shuffled like the out-degrees (so the hottest read
  rank is the biggest hub), blended with an *uncorrelated* Zipf(0.8) whose
  shuffler has its own seed, for 99.5% of reads (a `nextDouble` decides);
* link writes: the same, with Zipf(0.741) and the blend and shape of the
  active quirks mode (`Workload.effective_write_uncorr`);
* node reads Zipf(0.625), node updates Zipf(0.606), node deletes uniform,
  all shuffled with the node seed.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import Workload
from .distributions import Uniform, Zipf
from .jrandom import JavaRandom
from .shuffler import GROUPS, NLINKS_SEED, NODE_SEED, UNCORR_SEED, InvertibleShuffler


@dataclass(frozen=True)
class Access:
    """A rank distribution and the shuffler that maps ranks to ids."""

    dist: Zipf | Uniform
    shuffler: InvertibleShuffler
    start: int

    def next_id(self, rng: JavaRandom) -> int:
        rank = self.dist.choose(rng)
        return self.start + self.shuffler.permute(rank - self.start)


@dataclass(frozen=True)
class Blend:
    """`primary` except for a `blend` fraction of draws, which use `other`."""

    primary: Access
    other: Access | None
    blend: float  # a fraction in [0, 1]

    def next_id(self, rng: JavaRandom) -> int:
        if self.other is None or rng.next_double() >= self.blend:
            return self.primary.next_id(rng)
        return self.other.next_id(rng)


@dataclass(frozen=True)
class AccessModel:
    """The id1 distributions of one workload; immutable, so requesters share it."""

    link_reads: Blend
    link_writes: Blend
    node_reads: Access
    node_updates: Access
    node_deletes: Access

    @classmethod
    def build(cls, w: Workload) -> AccessModel:
        lo, hi, n = w.startid1, w.maxid1, w.maxid1 - w.startid1
        corr = InvertibleShuffler(NLINKS_SEED, GROUPS, n)
        uncorr = InvertibleShuffler(UNCORR_SEED, GROUPS, n)
        node = InvertibleShuffler(NODE_SEED, GROUPS, n)

        def zipf(shape: float, shuffler: InvertibleShuffler) -> Access:
            return Access(Zipf(lo, hi, shape), shuffler, lo)

        write_blend, write_shape = w.effective_write_uncorr
        return cls(
            link_reads=Blend(
                zipf(w.read_shape, corr),
                zipf(w.read_uncorr_shape, uncorr) if w.read_uncorr_blend > 0 else None,
                w.read_uncorr_blend / 100,
            ),
            link_writes=Blend(
                zipf(w.write_shape, corr),
                zipf(write_shape, uncorr) if write_blend > 0 else None,
                write_blend / 100,
            ),
            node_reads=zipf(w.node_read_shape, node),
            node_updates=zipf(w.node_update_shape, node),
            node_deletes=Access(Uniform(lo, hi), node, lo),
        )
