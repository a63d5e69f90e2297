"""`java.util.Random`, bit for bit, so the port draws the numbers LinkBench draws.

Java's generator is a 48-bit linear congruential generator (Knuth, TAOCP
3.2.1): the state advances as `state = (state * 0x5DEECE66D + 0xB) mod 2^48`
and `next(bits)` returns the top `bits` bits of the new state as a signed
32-bit int. Every other method is built from `next`:

* `nextInt(bound)` takes 31 bits; a power-of-two bound uses the high bits
  (`bound * r >> 31`), any other bound uses `r % bound` and *rejects* the
  draws that would bias the result (the loop whose test overflows a Java
  int), so it may consume more than one `next`;
* `nextLong` is two 32-bit draws, `(hi << 32) + lo` in 64-bit arithmetic;
* `nextDouble` is 26 + 27 bits scaled by 2^-53;
* `nextGaussian` is the Marsaglia polar method and caches its second value.

The seed given to the constructor is scrambled by XOR with the multiplier.
`math.sqrt` and `math.log` stand in for `StrictMath`: both are within one
ulp, and the tests compare whole sequences against values Java printed.
"""

from __future__ import annotations

import math
import struct

_MULTIPLIER = 0x5DEECE66D
_ADDEND = 0xB
_MASK = (1 << 48) - 1
_DOUBLE_UNIT = 1.0 / (1 << 53)
_INT_MAX = (1 << 31) - 1


def to_int32(value: int) -> int:
    """Java's `(int)` cast: the low 32 bits, signed."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def to_int64(value: int) -> int:
    """Java's `(long)` wrap-around: the low 64 bits, signed."""
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >= 1 << 63 else value


class JavaRandom:
    """A drop-in for `java.util.Random(seed)`; not thread-safe (use one per thread)."""

    __slots__ = ("_gaussian", "_seed")

    def __init__(self, seed: int) -> None:
        self._seed = (seed ^ _MULTIPLIER) & _MASK
        self._gaussian: float | None = None

    def next_bits(self, bits: int) -> int:
        """`next(bits)`: the top `bits` of the advanced state, as a signed int."""
        self._seed = seed = (self._seed * _MULTIPLIER + _ADDEND) & _MASK
        r = seed >> (48 - bits)
        return r - (1 << 32) if bits == 32 and r >= 1 << 31 else r

    def next_int(self) -> int:
        """`nextInt()`: a signed 32-bit int."""
        return self.next_bits(32)

    def next_int_bounded(self, bound: int) -> int:
        """`nextInt(bound)`: uniform in [0, bound), with Java's rejection loop."""
        if bound <= 0:
            raise ValueError(f"bound must be positive, got {bound}")
        self._seed = seed = (self._seed * _MULTIPLIER + _ADDEND) & _MASK
        r = seed >> 17
        m = bound - 1
        if bound & m == 0:  # a power of two: use the high bits, they are better
            return (bound * r) >> 31
        u = r
        r = u % bound
        # Java tests `u - r + m < 0` in int arithmetic, i.e. whether it overflowed.
        while u - r + m > _INT_MAX:
            self._seed = seed = (self._seed * _MULTIPLIER + _ADDEND) & _MASK
            u = seed >> 17
            r = u % bound
        return r

    def next_ints_bounded(self, bound: int, count: int) -> list[int]:
        """`count` calls of `nextInt(bound)` for a bound that is not a power of two.

        The same numbers as a loop over `next_int_bounded`, with the state in
        locals: payload generation calls this for every byte.
        """
        if bound <= 0 or bound & (bound - 1) == 0:
            return [self.next_int_bounded(bound) for _ in range(count)]
        seed, m = self._seed, bound - 1
        out: list[int] = []
        mult, add, mask, int_max = _MULTIPLIER, _ADDEND, _MASK, _INT_MAX  # locals: faster
        append = out.append
        for _ in range(count):
            seed = (seed * mult + add) & mask
            u = seed >> 17
            r = u % bound
            while u - r + m > int_max:
                seed = (seed * mult + add) & mask
                u = seed >> 17
                r = u % bound
            append(r)
        self._seed = seed
        return out

    def next_long(self) -> int:
        """`nextLong()`: a signed 64-bit int from two 32-bit draws."""
        hi = self.next_bits(32)
        lo = self.next_bits(32)
        return to_int64((hi << 32) + lo)

    def next_double(self) -> float:
        """`nextDouble()`: uniform in [0, 1) with 53 random bits."""
        self._seed = seed = (self._seed * _MULTIPLIER + _ADDEND) & _MASK
        hi = seed >> 22
        self._seed = seed = (seed * _MULTIPLIER + _ADDEND) & _MASK
        return ((hi << 27) + (seed >> 21)) * _DOUBLE_UNIT

    def next_gaussian(self) -> float:
        """`nextGaussian()`: standard normal, two at a time (the polar method)."""
        cached = self._gaussian
        if cached is not None:
            self._gaussian = None
            return cached
        while True:
            v1 = 2 * self.next_double() - 1
            v2 = 2 * self.next_double() - 1
            s = v1 * v1 + v2 * v2
            if 0 < s < 1:
                break
        multiplier = math.sqrt(-2 * strict_log(s) / s)
        self._gaussian = v2 * multiplier
        return v1 * multiplier


def java_round(x: float) -> int:
    """`Math.round(double)`: the closest long, ties rounding up (not to even)."""
    floor = math.floor(x)
    return int(floor) + 1 if x - floor >= 0.5 else int(floor)


def _from_bits(bits: int) -> float:
    value: float = struct.unpack("<d", struct.pack("<Q", bits))[0]
    return value


def _bits(x: float) -> int:
    return int(struct.unpack("<Q", struct.pack("<d", x))[0])


# fdlibm's e_log.c constants, given by their IEEE bits so no digit is lost.
_LN2_HI = _from_bits(0x3FE62E42FEE00000)
_LN2_LO = _from_bits(0x3DEA39EF35793C76)
_TWO54 = _from_bits(0x4350000000000000)
_LG1 = _from_bits(0x3FE5555555555593)
_LG2 = _from_bits(0x3FD999999997FA04)
_LG3 = _from_bits(0x3FD2492494229359)
_LG4 = _from_bits(0x3FCC71C51D8E78AF)
_LG5 = _from_bits(0x3FC7466496CB03DE)
_LG6 = _from_bits(0x3FC39A09D078C69F)
_LG7 = _from_bits(0x3FC2F112DF3E5244)


def strict_log(x: float) -> float:
    """`StrictMath.log`: fdlibm's algorithm, so `nextGaussian` matches Java to the bit.

    The C library's `log` is as accurate but rounds differently in ~7% of
    calls (measured), which would change some generated data sizes.
    Defined for the positive finite arguments `nextGaussian` passes.
    """
    if not x > 0 or math.isinf(x):
        return math.log(x) if x > 0 else float("nan") if x < 0 else float("-inf")
    bits = _bits(x)
    hx = bits >> 32
    k = 0
    if hx < 0x00100000:  # subnormal: scale into the normal range
        k -= 54
        x *= _TWO54
        bits = _bits(x)
        hx = bits >> 32
    k += (hx >> 20) - 1023
    hx &= 0x000FFFFF
    i = (hx + 0x95F64) & 0x100000
    # normalise x (or x/2) into [sqrt(2)/2, sqrt(2)) by setting its exponent
    x = _from_bits(((hx | (i ^ 0x3FF00000)) << 32) | (bits & 0xFFFFFFFF))
    k += i >> 20
    f = x - 1.0
    dk = float(k)
    if (0x000FFFFF & (2 + hx)) < 3:  # |f| < 2^-20
        if f == 0.0:
            return 0.0 if k == 0 else dk * _LN2_HI + dk * _LN2_LO
        r = f * f * (0.5 - 0.33333333333333333 * f)
        return f - r if k == 0 else dk * _LN2_HI - ((r - dk * _LN2_LO) - f)
    s = f / (2.0 + f)
    z = s * s
    i = hx - 0x6147A
    w = z * z
    j = 0x6B851 - hx
    t1 = w * (_LG2 + w * (_LG4 + w * _LG6))
    t2 = z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7)))
    i |= j
    r = t2 + t1
    if i > 0:
        hfsq = 0.5 * f * f
        if k == 0:
            return f - (hfsq - s * (hfsq + r))
        return dk * _LN2_HI - ((hfsq - (s * (hfsq + r) + dk * _LN2_LO)) - f)
    if k == 0:
        return f - s * (f - r)
    return dk * _LN2_HI - ((s * (f - r) - dk * _LN2_LO) - f)
