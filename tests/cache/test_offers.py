"""A read of a list's newest edges is its fill (`cache.offers`): the
rows it read are installed only if no write overlapped it, and a list known empty
is not read at all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import assocdb
from assocdb import CacheConfig, Graph
from assocdb.cache import offers
from tests.support.helpers import statements


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[Graph]:
    g = assocdb.open(tmp_path / "g", shards=2, cache=CacheConfig(max_age=3600))
    g.define_assoc("likes")
    g.bulk_load([(1, "likes", m, m) for m in range(1, 81)])
    yield g
    g.close()


def test_the_second_miss_of_the_newest_edges_fills_with_its_own_read(graph: Graph) -> None:
    g = graph
    plain = g.assoc_range(1, "likes", 0, 20)  # a first miss: read, nothing cached
    cache = g.engine.cache
    assert cache is not None
    assert (1, 1) not in cache._lists
    assert len(statements(g, lambda: g.assoc_range(1, "likes", 0, 20))) == 1  # the fill
    entry = cache._lists[(1, 1)]
    assert entry.prefix is not None
    assert len(entry.prefix) == 50  # what a fill holds (`fill_size`), not just the 20
    assert not entry.complete
    assert cache.stats().fills == 1
    assert statements(g, lambda: g.assoc_range(1, "likes", 0, 50)) == []  # a hit
    assert g.assoc_range(1, "likes", 0, 20) == plain


def test_a_write_during_the_read_is_not_hidden_by_its_fill(graph: Graph) -> None:
    g = graph
    cache = g.engine.cache
    assert cache is not None
    g.assoc_range(1, "likes", 0, 10)  # a first miss
    assert offers.unfilled(cache, (1, 1))
    ticket = offers.claim(cache, (1, 1))
    assert ticket is not None
    before = g._reads._loader(1, g.engine.assoc_type("likes"))(51)  # the read, then a write
    g.assoc_add(1, "likes", 1000, time=1000)
    offers.offer(cache, (1, 1), before[:50], False, ticket, 0.0)
    assert cache._lists.get((1, 1)) is None or cache._lists[(1, 1)].prefix is None
    assert cache.stats().stale_fills == 1
    assert g.assoc_range(1, "likes", 0, 10)[0].id2 == 1000
    assert g.assoc_range(1, "likes", 0, 10)[0].id2 == 1000  # filled now, with the write


def test_a_list_known_empty_is_not_read(graph: Graph) -> None:
    g = graph
    for _ in range(2):
        assert g.assoc_count(5, "likes") == 0  # the count is cached: 0
    assert statements(g, lambda: g.assoc_range(5, "likes", 0, 10)) == []


def test_the_fill_keeps_its_answer_so_the_next_read_is_a_kept_hit(graph: Graph) -> None:
    g = graph
    cache = g.engine.cache
    assert cache is not None
    g.assoc_range(1, "likes", 0, 20)  # a first miss
    filled = g.assoc_range(1, "likes", 0, 20)  # the fill
    kept = cache.answer((1, 1), (0, 20))
    assert kept is not None
    assert list(kept) == filled
    assert [a.id2 for a in filled] == list(range(80, 60, -1))
    # The next read is the kept answer (a decode of the prefix would build new records).
    again = g.assoc_range(1, "likes", 0, 20)
    assert again == filled
    assert all(a is b for a, b in zip(again, filled, strict=True))
    g.assoc_add(1, "likes", 1000, time=1000)  # a write patches or drops the kept answer
    assert [a.id2 for a in g.assoc_range(1, "likes", 0, 20)] == [1000, *range(80, 61, -1)]


def test_a_write_between_the_install_and_the_keep_keeps_nothing(
    graph: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = graph
    cache = g.engine.cache
    assert cache is not None
    offer = offers.offer

    def offer_then_write(*args: object, **kw: object) -> object:
        fresh = offer(*args, **kw)  # type: ignore[arg-type]
        assert fresh is not None  # installed: the entry's answers, empty
        g.assoc_add(1, "likes", 1000, time=1000)  # lands before the reader keeps
        return fresh

    monkeypatch.setattr(offers, "offer", offer_then_write)
    g.assoc_range(1, "likes", 0, 20)  # a first miss
    stale = g.assoc_range(1, "likes", 0, 20)  # the fill: read before the write
    assert stale[0].id2 == 80
    monkeypatch.setattr(offers, "offer", offer)
    assert cache.answer((1, 1), (0, 20)) is None or cache.answer((1, 1), (0, 20))[0].id2 == 1000
    assert [a.id2 for a in g.assoc_range(1, "likes", 0, 20)][:2] == [1000, 80]


def test_a_fill_with_data_keeps_no_answer(tmp_path: Path) -> None:
    g = assocdb.open(tmp_path / "d", shards=2, cache=CacheConfig(max_age=3600))
    g.define_assoc("likes")
    g.bulk_load([(1, "likes", m, m, {"n": m}) for m in range(1, 11)])
    cache = g.engine.cache
    assert cache is not None
    for _ in range(2):  # a first miss, then the fill
        found = g.assoc_range(1, "likes", 0, 5)
    assert (1, 1) in cache._lists
    assert cache.answer((1, 1), (0, 5)) is None  # records with objects are not shared
    found[0].data["n"] = -1  # a caller's change reaches no other reader
    assert g.assoc_range(1, "likes", 0, 5)[0].data == {"n": 10}
    g.close()
