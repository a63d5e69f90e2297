"""The rebalance planner (`storage.rebalance_plan`): pure, so checked exhaustively."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from assocdb.storage.rebalance_plan import PlannedMove, loads, plan, spread

SERVERS = ["db1", "db2", "db3", "db4"]


def three_of_four(shards: int) -> list[list[str]]:
    """Shard s on db1-db3 (two replicas each); db4 new and empty."""
    return [[SERVERS[s % 3], SERVERS[(s + 1) % 3]] for s in range(shards)]


def test_a_new_server_gets_a_fair_share() -> None:
    replicas = three_of_four(16)
    moves = plan(replicas, [100] * 16, SERVERS)
    assert len(moves) == 8  # 32 copies over 4 servers: 8 each
    after = apply(replicas, moves)
    assert loads(after, [100] * 16, SERVERS) == dict.fromkeys(SERVERS, 800)


def test_to_only_fills_that_server() -> None:
    replicas = three_of_four(16)
    moves = plan(replicas, [100] * 16, SERVERS, targets=["db4"])
    assert {m.target for m in moves} == {"db4"}
    assert loads(apply(replicas, moves), [100] * 16, SERVERS)["db4"] == 800


def test_balanced_servers_get_no_moves() -> None:
    assert plan([["a"], ["b"]], [10, 10], ["a", "b"]) == []
    assert plan([["a"], ["b"]], [10, 11], ["a", "b"]) == []  # moving would not help


def test_empty_shards_never_move_and_limit_caps_the_plan() -> None:
    assert plan([["a"], ["a"], ["a"]], [0, 0, 0], ["a", "b"]) == []
    assert len(plan([["a"]] * 6, [5] * 6, ["a", "b", "c"], limit=2)) == 2


def test_the_biggest_shard_that_helps_is_chosen() -> None:
    moves = plan([["a"], ["a"], ["a"]], [50, 30, 20], ["a", "b"])
    assert moves[0] == PlannedMove(0, "a", "b", 50)  # nearest half of 100
    assert loads(apply([["a"], ["a"], ["a"]], moves), [50, 30, 20], ["a", "b"]) == {
        "a": 50,
        "b": 50,
    }


def apply(replicas: list[list[str]], moves: list[PlannedMove]) -> list[list[str]]:
    placed = [list(names) for names in replicas]
    for move in moves:
        assert move.source in placed[move.shard]
        assert move.target not in placed[move.shard]
        placed[move.shard][placed[move.shard].index(move.source)] = move.target
    return placed


maps = st.integers(1, 24).flatmap(
    lambda shards: st.tuples(
        st.lists(
            st.lists(st.sampled_from(SERVERS), min_size=1, max_size=3, unique=True),
            min_size=shards,
            max_size=shards,
        ),
        st.lists(st.integers(0, 10_000), min_size=shards, max_size=shards),
    )
)


@given(maps, st.sampled_from([None, ["db4"], ["db1", "db4"]]))
def test_every_move_lowers_the_imbalance_and_keeps_replica_sets_whole(
    placement: tuple[list[list[str]], list[int]], targets: list[str] | None
) -> None:
    replicas, sizes = placement
    moves = plan(replicas, sizes, SERVERS, targets)
    placed = [list(names) for names in replicas]
    squares = sum(v * v for v in loads(placed, sizes, SERVERS).values())
    for move in moves:
        placed = apply(placed, [move])
        assert sizes[move.shard] == move.rows > 0
        assert targets is None or move.target in targets
        now = sum(v * v for v in loads(placed, sizes, SERVERS).values())
        assert now < squares  # strictly better: the plan ends, nothing moves back and forth
        squares = now
    assert spread(loads(placed, sizes, SERVERS)) <= spread(loads(replicas, sizes, SERVERS))
    assert plan(placed, sizes, SERVERS, targets) == []  # nothing left that helps
