"""The real ego-Facebook graph, checked against an independent reading of the file."""

from __future__ import annotations

import gzip
from collections import defaultdict
from importlib import resources
from pathlib import Path

import pytest

import assocdb
from assocdb import Graph
from assocdb.cli.datasets import EGO_FACEBOOK_FRIENDSHIPS, EGO_FACEBOOK_PEOPLE, ego_facebook

BASE = 1_600_000_000_000


def read_file() -> list[tuple[int, int]]:
    """The friendships straight from the gzip file, SNAP ids shifted by one."""
    path = resources.files("assocdb").joinpath("facebook_combined.txt.gz")
    with gzip.open(str(path), "rt") as lines:
        return [(int(a) + 1, int(b) + 1) for a, b in (line.split() for line in lines)]


@pytest.fixture(scope="module")
def facebook(tmp_path_factory: pytest.TempPathFactory) -> Graph:
    g = assocdb.open(tmp_path_factory.mktemp("fb") / "graph", shards=8)
    g.define_assoc("friend", symmetric=True)
    loaded = g.bulk_load((a, "friend", b, BASE + n) for n, (a, b) in enumerate(ego_facebook()))
    assert loaded == EGO_FACEBOOK_FRIENDSHIPS
    return g


@pytest.fixture(scope="module")
def friends() -> dict[int, dict[int, int]]:
    """person -> {friend: time of the friendship}, computed from the file alone."""
    table: dict[int, dict[int, int]] = defaultdict(dict)
    for n, (a, b) in enumerate(read_file()):
        table[a][b] = table[b][a] = BASE + n
    return table


def test_the_file_is_what_the_readme_says(friends: dict[int, dict[int, int]]) -> None:
    assert len(read_file()) == EGO_FACEBOOK_FRIENDSHIPS
    assert len(friends) == EGO_FACEBOOK_PEOPLE


def test_every_friend_count(facebook: Graph, friends: dict[int, dict[int, int]]) -> None:
    wrong = {
        person: (facebook.assoc_count(person, "friend"), len(mine))
        for person, mine in friends.items()
        if facebook.assoc_count(person, "friend") != len(mine)
    }
    assert wrong == {}
    assert facebook.check_counts() == []


@pytest.mark.parametrize("person", [1, 108, 1685, 1913, 3981, 4039])
def test_cursor_walk_matches_the_file(
    facebook: Graph, friends: dict[int, dict[int, int]], person: int
) -> None:
    expected = sorted(friends[person].items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    walked, cursor, pages = [], None, 0
    while True:
        page = facebook.assoc_page(person, "friend", cursor, limit=37)
        walked += [(a.id2, a.time) for a in page.items]
        pages += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert walked == expected
    assert pages == max(1, -(-len(expected) // 37))


def test_mutual_friends_match_set_intersection(
    facebook: Graph, friends: dict[int, dict[int, int]]
) -> None:
    from assocdb.cli.main import mutual_friends

    for a, b in [(1, 2), (108, 1685), (1913, 2348)]:
        assert mutual_friends(facebook, a, b) == sorted(friends[a].keys() & friends[b].keys())


def test_the_package_ships_the_same_data_as_shared(facebook: Graph) -> None:
    shared = Path(__file__).resolve().parents[3] / "shared" / "data" / "facebook_combined.txt.gz"
    if not shared.exists():
        pytest.skip("no ../shared/data next to this checkout")
    packaged = resources.files("assocdb").joinpath("facebook_combined.txt.gz").read_bytes()
    assert packaged == shared.read_bytes()
