"""Objects and edges per type, from the kept counts (`api/inventory.py`), on every backend."""

from __future__ import annotations

from assocdb import Graph
from assocdb.api.inventory import type_totals


def test_totals_per_type_and_state_match_what_was_written(graph: Graph) -> None:
    users = [graph.obj_add("user", {"n": n}) for n in range(7)]
    graph.obj_add("post", {"text": "hi"})
    for user in users[1:]:
        graph.assoc_add(user, "follows", users[0])
    graph.assoc_add(users[0], "likes", 99)
    graph.assoc_add(users[0], "likes", 98)
    graph.assoc_archive(users[0], "likes", 98)
    graph.assoc_delete(users[1], "follows", users[0])
    graph.obj_delete(users[6])
    totals = type_totals(graph.engine)
    assert totals.objects == {"user": 7, "post": 1}  # the tombstone counts, as the index does
    assert totals.edges == {
        "followed_by": {"normal": 5, "removed": 1},
        "follows": {"normal": 5, "removed": 1},
        "likes": {"normal": 1, "archived": 1},
    }


def test_an_empty_graph_has_no_edges(graph: Graph) -> None:
    totals = type_totals(graph.engine)
    assert totals.edges == {}
    assert set(totals.objects.values()) == {0}
