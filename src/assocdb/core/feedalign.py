"""One feed position per shard across its replicas (pure: no I/O).

Every replica of a shard map's shard records the changes it applies in its own commit
order (`storage.sqlfeed`): writes reach the replicas independently, so the same change
has another position on each. A feed position of a replicated shard therefore names its
replica: the top bits are the replica's `tag` (a stable hash of its member name, 1..255),
the low 45 the position in that replica's numbering (so a position stays below 2**53,
exact as a JavaScript number). A reader stays on the replica its
cursor names while it is up; when it is down, the cursor is *translated* to another
replica through an alignment checkpoint, never forward of what was read.

An alignment checkpoint `(P, Q)` of replica `i` against peer `r` says: every record of
`i` up to position `Q` is in `r`'s feed up to `P` (the same change: kind, key, state,
`updated_at`), or is superseded there (`r` recorded a newer change of the same key up to
`P`, so a reader of `r` saw the key's newer state: the same thing a reader of `r` alone
would see). A consumer that read `r` up to `p >= P` has seen all of `i` up to `Q`, so it
continues on `i` after `Q` and loses nothing; what it gets again (`i`'s records after
`Q` that were in `r` up to `p`) are duplicates, which at-least-once delivery allows.
`align` moves a checkpoint on as far as `i`'s records match; it stops at the first that
`r` does not hold (yet: `r` may record it later), so a checkpoint is always true.
"""

from __future__ import annotations

from collections.abc import Sequence
from hashlib import blake2b

from .feed import EDGE, FeedRow

SHIFT = 45  # a replicated position: tag << SHIFT | its own (< 2**53: exact in JavaScript)
LOCAL = (1 << SHIFT) - 1
Key = tuple[int, int, int, int]


def tag_of(name: str) -> int:
    """The tag (1..255) of the replica on member `name` in replicated positions."""
    return 1 + blake2b(name.encode(), digest_size=8).digest()[0] % 255


def tagged(tag: int, position: int) -> int:
    """A replica's own position as a replicated one."""
    return tag << SHIFT | position


def split(position: int) -> tuple[int, int]:
    """(tag, the replica's own position) of a replicated position; tag 0 is the start."""
    return position >> SHIFT, position & LOCAL


def later(old: int, new: int) -> int:
    """The further of two positions of one shard (a member's commit never moves back);
    on another replica than `old`'s, `new` (positions of two replicas do not compare:
    the newer cursor was translated)."""
    if not old or not new or split(old)[0] == split(new)[0]:
        return max(old, new)
    return new


def key(row: FeedRow) -> Key:
    """What a record is a change of: an edge leg, an object, a node state."""
    return (row[1], row[2], row[3], row[4] if row[1] == EDGE else 0)


def align(
    mine: Sequence[FeedRow], theirs: Sequence[FeedRow], at: tuple[int, int]
) -> tuple[int, int]:
    """The checkpoint `(P, Q)` moved on from `at` over `mine` (this replica's records after
    `Q`, in order) against `theirs` (the peer's records around and after `P`); see the
    module doc. Positions are the replicas' own."""
    of_key: dict[Key, list[tuple[int, int, int]]] = {}  # key: [(updated_at, state, position)]
    for row in theirs:
        of_key.setdefault(key(row), []).append((row[7], row[5], row[0]))
    upto, done = at
    for row in mine:
        # The same change, else the first newer one of its key (not the newest: the
        # checkpoint moves no further than it must, and the lookback stays short).
        found = next(
            (
                pos
                for at_, state, pos in of_key.get(key(row), ())
                if at_ > row[7] or (at_, state) == (row[7], row[5])
            ),
            None,
        )
        if found is None:
            break  # the peer has not recorded it (yet)
        upto, done = max(upto, found), row[0]
    return upto, done
