"""Java's `SecureRandom.getInstance("SHA1PRNG")` seeded with `setSeed`, bit for bit.

LinkBench seeds one such "master" generator from the configured seed and
gives each requester (and the loader) a `java.util.Random` seeded from the
master's `nextLong()`, so reproducing per-thread request streams needs this
generator too.

The algorithm (the SUN provider's): the state is `SHA-1(seed)`. Each block
of output is `SHA-1(state)`, after which the state becomes
`state + output + 1 (mod 2^160)`, added byte by byte from index 0 with
*signed* bytes and an arithmetic-shift carry, exactly as Java does it (if no
byte changed, the first byte is bumped). Unused output bytes are kept for the
next call. `next(bits)` reads whole bytes big-endian; `nextLong` is
`java.util.Random`'s: `(next(32) << 32) + next(32)`.
"""

from __future__ import annotations

import hashlib

from .jrandom import to_int32, to_int64

_DIGEST_SIZE = 20


def _signed(byte: int) -> int:
    return byte - 256 if byte >= 128 else byte


class Sha1Prng:
    """The SHA1PRNG generator after `setSeed(long)` as LinkBench's driver calls it."""

    def __init__(self, seed: int) -> None:
        # LinkBench passes ByteBuffer.allocate(8).putLong(seed).array(): big-endian.
        self._state = bytearray(
            hashlib.sha1(to_int64(seed).to_bytes(8, "big", signed=True)).digest()
        )
        self._remainder = b""

    def next_bytes(self, n: int) -> bytes:
        """`nextBytes(new byte[n])`."""
        out = bytearray(self._remainder[:n])
        self._remainder = self._remainder[n:]
        while len(out) < n:
            block = hashlib.sha1(self._state).digest()
            self._step(block)
            take = min(n - len(out), _DIGEST_SIZE)
            out += block[:take]
            self._remainder = block[take:]
        return bytes(out)

    def _step(self, output: bytes) -> None:
        state = self._state
        carry, changed = 1, False
        for i in range(_DIGEST_SIZE):
            v = _signed(state[i]) + _signed(output[i]) + carry
            t = v & 0xFF
            changed |= state[i] != t
            state[i] = t
            carry = v >> 8  # arithmetic shift: the carry may be -1
        if not changed:
            state[0] = (state[0] + 1) & 0xFF

    def next_bits(self, bits: int) -> int:
        """`SecureRandom.next(bits)`: whole bytes, big-endian, shifted down."""
        nbytes = (bits + 7) // 8
        value = int.from_bytes(self.next_bytes(nbytes), "big")
        return to_int32(value >> (nbytes * 8 - bits))

    def next_long(self) -> int:
        """`nextLong()`, as `java.util.Random` builds it from two `next(32)`."""
        hi = self.next_bits(32)
        lo = self.next_bits(32)
        return to_int64((hi << 32) + lo)


def thread_seeds(seed: int, n: int) -> list[int]:
    """The `java.util.Random` seeds LinkBench's driver hands its `n` requesters.

    The driver logs the master's first `nextLong()` at debug level, and Java
    evaluates that argument whatever the level, so one value is skipped.
    """
    master = Sha1Prng(seed)
    master.next_long()
    return [master.next_long() for _ in range(n)]
