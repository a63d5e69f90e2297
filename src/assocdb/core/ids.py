"""Ids, and which logical shard each id lives on.

Ids are positive signed 64-bit integers (1 … 2^63-1), so they fit a BIGINT in
every SQL database. They may come from outside (another system's user ids) or
be allocated here.

`shard_of(id)` must be a pure function of the id, and must spread ids well
even when they have structure (Snowflake ids whose low bits are mostly zero,
multiples of the shard count, …). So it hashes: `mix` is a bijection of the
63-bit integers (xor-shifts and odd multiplications, after splitmix64), and the
shard is `mix(id) % shards`.

Because `mix` is invertible, an allocated id can *carry* its shard: the n-th id
allocated on shard s is `unmix(n * shards + s)`. Allocated ids never collide
with one another, look random (no hot shard, nothing to enumerate), and
`shard_of` finds their shard with no lookup table, so a comment can be placed on
the shard of its post (TAO's colocation).
"""

from __future__ import annotations

from collections.abc import Iterable

from .errors import InvalidRequest

MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)
MIN_TIME = MIN_INT64 + 1  # the smallest edge time
_MASK = MAX_INT64  # the 63 low bits
_C1 = 0x3F58476D1CE4E5B9  # odd, so multiplication is invertible mod 2^63
_C2 = 0x14D049BB133111EB
_C1_INV = pow(_C1, -1, 2**63)
_C2_INV = pow(_C2, -1, 2**63)


def mix(x: int) -> int:
    """A bijection of [0, 2^63) that scatters structured inputs."""
    x ^= x >> 31
    x = (x * _C1) & _MASK
    x ^= x >> 29
    x = (x * _C2) & _MASK
    return x ^ (x >> 32)


def unmix(y: int) -> int:
    """The inverse of `mix`."""
    y = _unshift(y, 32)
    y = (y * _C2_INV) & _MASK
    y = _unshift(y, 29)
    y = (y * _C1_INV) & _MASK
    return _unshift(y, 31)


def _unshift(y: int, k: int) -> int:
    """Invert `x ^= x >> k` on 63 bits."""
    x = y
    for _ in range(63 // k + 1):
        x = y ^ (x >> k)
    return x


def shard_of(id: int, shards: int) -> int:
    """The logical shard, in 0 … shards-1, that holds the rows of `id`: `mix(id) % shards`,
    `mix` inline (every read routes by it, and a call less is ~0.1 µs of a short one)."""
    x = id ^ (id >> 31)
    x = (x * _C1) & _MASK
    x ^= x >> 29
    x = (x * _C2) & _MASK
    return (x ^ (x >> 32)) % shards


def by_shard(ids: Iterable[int], shards: int) -> dict[int, list[int]]:
    """`ids` grouped by `shard_of`, each group in the order given: `mix` inline (a
    two-hop reach groups tens of ids per call, and a call each was ~0.6 µs)."""
    groups: dict[int, list[int]] = {}
    c1, c2, mask = _C1, _C2, _MASK
    for id in ids:
        x = id ^ (id >> 31)
        x = (x * c1) & mask
        x ^= x >> 29
        x = (x * c2) & mask
        shard = (x ^ (x >> 32)) % shards
        group = groups.get(shard)
        if group is None:
            groups[shard] = [id]
        else:
            group.append(id)
    return groups


def allocated_id(seq: int, shard: int, shards: int) -> int:
    """The id numbered `seq` (≥ 1) among those allocated on `shard`."""
    n = seq * shards + shard
    if n > MAX_INT64:
        raise InvalidRequest(f"shard {shard} has run out of ids")
    return unmix(n)


def check_id(value: object, name: str = "id") -> int:
    """Return `value` if it is a valid id, else raise InvalidRequest."""
    if type(value) is not int:
        raise InvalidRequest(
            f"{name} must be an integer, got {type(value).__name__} {value!r}",
            **{name: repr(value)},
        )
    if not 0 < value <= MAX_INT64:
        raise InvalidRequest(
            f"{name} must be between 1 and 2^63-1, got {value}", **{name: str(value)}
        )
    return value


def check_time(value: object, name: str = "time") -> int:
    """Return `value` if it is a valid edge time (MIN_TIME … 2^63-1), else InvalidRequest.

    -2^63 itself is kept out: cursors and range bounds use it as "before every time".
    """
    if type(value) is not int or not MIN_TIME <= value <= MAX_INT64:
        raise InvalidRequest(
            f"{name} must be an integer from -2^63+1 to 2^63-1, got {value!r}",
            **{name: repr(value)},
        )
    return value


def check_int64(value: object, name: str) -> int:
    """Return `value` if it is a signed 64-bit integer, else raise InvalidRequest."""
    if type(value) is not int or not MIN_INT64 <= value <= MAX_INT64:
        raise InvalidRequest(
            f"{name} must be a signed 64-bit integer, got {value!r}", **{name: repr(value)}
        )
    return value
