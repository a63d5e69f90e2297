"""Plan the moves that even out rows per server (pure: sizes in, moves out).

Each server's load is the rows of every shard copy it holds. A move takes one
shard copy from a server to a lighter one that holds no copy of that shard.
The planner repeats the best single move: from the heaviest server to the
lightest receiver, the shard whose size is nearest half their difference,
and only a shard smaller than the difference, so each move strictly lowers
the sum of squared loads: the plan ends, and never moves a shard back and
forth. Empty shards are never moved (they cost a move and change nothing).

With `targets` (`--to db4`) only those servers receive shards: the usual way
to fill a new server. `limit` caps the plan's length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple


class PlannedMove(NamedTuple):
    shard: int
    source: str
    target: str
    rows: int


def loads(
    replicas: Sequence[Sequence[str]], sizes: Sequence[int], servers: Sequence[str]
) -> dict[str, int]:
    """Rows per server: every shard copy it holds, counted whole."""
    load = dict.fromkeys(servers, 0)
    for shard, names in enumerate(replicas):
        for name in names:
            load[name] = load.get(name, 0) + sizes[shard]
    return load


def plan(
    replicas: Sequence[Sequence[str]],
    sizes: Sequence[int],
    servers: Sequence[str],
    targets: Sequence[str] | None = None,
    limit: int | None = None,
) -> list[PlannedMove]:
    """The moves, in order, that even out the rows per server among `servers` (the ones
    that may give or take shards); `replicas[shard]` names the servers holding the shard,
    `sizes[shard]` its rows.

    >>> plan([["a"], ["a"], ["b"]], [10, 10, 10], ["a", "b", "c"])
    [PlannedMove(shard=0, source='a', target='c', rows=10)]
    """
    if len(replicas) != len(sizes):
        raise ValueError("one size per shard")
    placed = [list(names) for names in replicas]
    load = loads(replicas, sizes, servers)
    givers = list(servers)
    receivers = [name for name in (targets if targets is not None else servers) if name in load]
    moves: list[PlannedMove] = []
    while limit is None or len(moves) < limit:
        found = _best(placed, sizes, load, givers, receivers)
        if found is None:
            return moves
        shard, source, target = found
        placed[shard][placed[shard].index(source)] = target
        load[source] -= sizes[shard]
        load[target] += sizes[shard]
        moves.append(PlannedMove(shard, source, target, sizes[shard]))
    return moves


def _best(
    placed: Sequence[Sequence[str]],
    sizes: Sequence[int],
    load: Mapping[str, int],
    givers: Sequence[str],
    receivers: Sequence[str],
) -> tuple[int, str, str] | None:
    """The next move: heaviest giver to lightest receiver that has a shard worth moving."""
    for target in sorted(receivers, key=lambda name: (load[name], name)):
        for source in sorted(givers, key=lambda name: (-load[name], name)):
            gap = load[source] - load[target]
            if gap <= 0:
                break
            fits = [
                shard
                for shard, names in enumerate(placed)
                if source in names and target not in names and 0 < sizes[shard] < gap
            ]
            if fits:
                shard = min(fits, key=lambda shard: (abs(gap - 2 * sizes[shard]), shard))
                return shard, source, target
    return None


def spread(load: Mapping[str, int]) -> int:
    """The heaviest server's rows minus the lightest's."""
    return max(load.values(), default=0) - min(load.values(), default=0)
