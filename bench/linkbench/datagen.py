"""LinkBench's payload generators: bytes that compress like real data.

`MotifData` keeps a buffer of random "motif" bytes, filled on first use.
Output is produced in chunks of min(128, buffer) bytes: with probability
`uniqueness` a chunk is fresh random bytes in [start, end], otherwise it
is a copy of a random slice of the motif buffer. Short payloads look random
on their own, but many of them together compress (the reference's target
is ~30% for links, ~60% for nodes). Each chunk draws one `nextDouble`, then
either one `nextInt` per byte or one `nextInt` for the slice offset.
"""

from __future__ import annotations

from .jrandom import JavaRandom

_MAX_CHUNK = 128


class MotifData:
    """`MotifDataGenerator.fill`; one instance per requester (the motifs are per instance)."""

    def __init__(self, start: int, end: int, uniqueness: float, motif_bytes: int = 512) -> None:
        if not 0 <= start < end < 256:
            raise ValueError(f"need 0 <= start < end < 256, got {start}, {end}")
        self.start, self.range = start, end - start + 1
        self.uniqueness = uniqueness
        self.motif_bytes = motif_bytes
        self._motifs: bytes | None = None

    def fill(self, rng: JavaRandom, n: int) -> bytes:
        """`n` bytes of payload."""
        nxt = rng.next_int_bounded
        motifs = self._motifs
        if motifs is None:
            motifs = self._motifs = self._fresh(rng, self.motif_bytes)
        chunk = min(_MAX_CHUNK, self.motif_bytes)
        out = bytearray()
        for i in range(0, n, chunk):
            if rng.next_double() < self.uniqueness:
                out += self._fresh(rng, min(n, i + chunk) - i)
            else:
                this_chunk = min(chunk, n - i)
                k = nxt(self.motif_bytes - this_chunk + 1)
                out += motifs[k : k + this_chunk]
        return bytes(out)

    def _fresh(self, rng: JavaRandom, n: int) -> bytes:
        start = self.start
        return bytes([(start + r) & 0xFF for r in rng.next_ints_bounded(self.range, n)])
