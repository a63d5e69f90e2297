"""Alignment checkpoints between two replicas' feeds (`core.feedalign`): whatever order
the replicas recorded the changes in, and whichever changes one of them never recorded
(overtaken by a newer one first), a checkpoint (P, Q) is always true: every record of
`mine` up to Q is in `theirs` up to P, or a newer change of its key is."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from assocdb.core import feedalign
from assocdb.core.feed import EDGE, OBJECT, FeedRow


def test_a_tagged_position_is_exact_in_javascript_and_splits_back() -> None:
    for name in ("db1", "db2", "a-very-long-member-name"):
        tag = feedalign.tag_of(name)
        assert 1 <= tag <= 255
        top = feedalign.tagged(tag, feedalign.LOCAL)
        assert top < 2**53
        assert feedalign.split(top) == (tag, feedalign.LOCAL)
    assert feedalign.split(0) == (0, 0)  # (the start of every feed)


def _history(seed: int, keys: int, writes: int) -> list[tuple[int, int, int]]:
    """Writes (key, updated_at, state) in stamp order."""
    rng = random.Random(seed)
    return [(rng.randrange(keys), at, rng.randrange(2)) for at in range(1, writes + 1)]


def _replica(writes: list[tuple[int, int, int]], seed: int, skew: int) -> list[FeedRow]:
    """A replica's feed: the writes applied in a locally shuffled order (each at most
    `skew` places from its stamp order), recording only those newer than what it holds."""
    rng = random.Random(seed)
    order = sorted(range(len(writes)), key=lambda i: i + rng.randrange(skew + 1))
    held: dict[int, int] = {}
    rows: list[FeedRow] = []
    for i in order:
        key, at, state = writes[i]
        if held.get(key, 0) < at:
            held[key] = at
            kind = OBJECT if key % 5 == 0 else EDGE
            rows.append(
                (len(rows) + 1, kind, key, 1, key * 7 if kind == EDGE else 1, state, 0, at, None)
            )
    return rows


def _true(mine: list[FeedRow], theirs: list[FeedRow], at: tuple[int, int]) -> bool:
    upto, done = at
    seen = theirs[:upto]
    for row in mine[:done]:
        key = feedalign.key(row)
        same = [r for r in seen if feedalign.key(r) == key]
        if not any((r[7] == row[7] and r[5] == row[5]) or r[7] > row[7] for r in same):
            return False
    return True


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    keys=st.integers(1, 40),
    writes=st.integers(1, 200),
    skew=st.integers(0, 30),
    batch=st.integers(1, 50),
)
def test_every_checkpoint_is_true_and_reaches_the_end_once_both_hold_everything(
    seed: int, keys: int, writes: int, skew: int, batch: int
) -> None:
    history = _history(seed, keys, writes)
    mine, theirs = _replica(history, seed + 1, skew), _replica(history, seed + 2, skew)
    at = (0, 0)
    for _ in range(len(mine) + 2):  # passes of `batch` records, as the aligner reads them
        start = max(0, at[0] - 100)  # (the lookback: well beyond the skew)
        moved = feedalign.align(mine[at[1] : at[1] + batch], theirs[start:], at)
        assert moved[1] >= at[1]
        if moved == at:
            break  # (a pass that moves nothing: so would every later one)
        assert _true(mine, theirs, moved), (at, moved)
        at = moved
    # Both replicas hold the same final state, so every record of mine is matched or
    # overtaken on theirs: the checkpoint reaches mine's end.
    assert at[1] == len(mine)


def test_a_record_the_peer_has_not_recorded_yet_stops_the_checkpoint() -> None:
    mine: list[FeedRow] = [(1, EDGE, 1, 1, 2, 0, 0, 10, None), (2, EDGE, 3, 1, 4, 0, 0, 11, None)]
    theirs: list[FeedRow] = [(1, EDGE, 1, 1, 2, 0, 0, 10, None)]
    assert feedalign.align(mine, theirs, (0, 0)) == (1, 1)
    newer: list[FeedRow] = [*theirs, (2, EDGE, 3, 1, 4, 1, 0, 12, None)]
    assert feedalign.align(mine, newer, (0, 0)) == (2, 2)  # overtaken by a newer change


def test_a_commit_moves_forward_on_one_replica_and_onto_another_after_a_failover() -> None:
    a, b = feedalign.tag_of("db1"), feedalign.tag_of("db3")
    assert a != b
    assert feedalign.later(feedalign.tagged(a, 9), feedalign.tagged(a, 5)) == feedalign.tagged(a, 9)
    assert feedalign.later(feedalign.tagged(a, 9), feedalign.tagged(b, 2)) == feedalign.tagged(b, 2)
    assert feedalign.later(0, feedalign.tagged(b, 2)) == feedalign.tagged(b, 2)
    assert feedalign.later(7, 3) == 7  # (untagged: one database)
