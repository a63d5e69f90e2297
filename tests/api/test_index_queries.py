"""Index queries against a brute-force model: any eq/low/high/desc/limit, paged to the end,
returns exactly the matching objects in key order, on one shard or merged over all."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import assocdb
from tests.core.test_keys import rank

VALUES: list[Any] = [None, False, True, -1, 0, 1, 1.5, 2, "", "a", "b", "ab"]
MISSING = object()


def model(
    objects: dict[int, dict[str, Any]],
    props: list[str],
    eq: list[Any],
    low: Any,
    high: Any,
    desc: bool,
) -> list[int]:
    found = []
    for id, data in objects.items():
        if any(p not in data for p in props):
            continue
        key = [data[p] for p in props]
        if [rank(v) for v in key[: len(eq)]] != [rank(v) for v in eq]:
            continue
        nxt = rank(key[len(eq)]) if len(eq) < len(props) else None
        if low is not MISSING and (nxt is None or nxt < rank(low)):
            continue
        if high is not MISSING and (nxt is None or nxt > rank(high)):
            continue
        found.append(([rank(v) for v in key], id))
    found.sort(reverse=desc)
    return [id for _, id in found]


def test_queries_match_the_model(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "g", shards=4)
    try:
        g.define_object("thing")
        g.define_index("ab", "thing", ["a", "b"], shard_on="a")
        g.define_index("b_only", "thing", ["b"])
        rnd = random.Random(5)
        objects: dict[int, dict[str, Any]] = {}
        for _ in range(80):
            data = {p: rnd.choice(VALUES) for p in "ab" if rnd.random() < 0.9}
            objects[g.obj_add("thing", data)] = data
        for id in rnd.sample(list(objects), 15):  # updates and deletes leave stale entries
            if rnd.random() < 0.5:
                g.obj_delete(id)
                del objects[id]
            else:
                objects[id] = {**objects[id], "a": rnd.choice(VALUES)}
                g.obj_update(id, {"a": objects[id]["a"]})

        value = st.sampled_from(VALUES)
        bound = st.one_of(st.just(MISSING), value)

        @settings(max_examples=150, deadline=None)
        @given(
            st.sampled_from([("ab", ["a", "b"]), ("b_only", ["b"])]),
            st.lists(value, max_size=2),
            bound,
            bound,
            st.booleans(),
            st.integers(1, 7),
        )
        def check(
            index: tuple[str, list[str]], eq: list[Any], low: Any, high: Any, desc: bool, limit: int
        ) -> None:
            name, props = index
            eq = eq[: len(props)]
            if len(eq) == len(props):
                low = high = MISSING
            # None means "no bound" (null sorts first: to find nulls, use eq=[None]).
            low = MISSING if low is None else low
            high = MISSING if high is None else high
            got: list[int] = []
            cursor = None
            while True:
                page = g.index_query(
                    name,
                    eq,
                    None if low is MISSING else low,
                    None if high is MISSING else high,
                    desc=desc,
                    limit=limit,
                    cursor=cursor,
                )
                assert len(page.items) <= limit
                got += [o.id for o in page.items]
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            assert got == model(objects, props, eq, low, high, desc)

        check()
    finally:
        g.close()
