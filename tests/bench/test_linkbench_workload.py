"""The LinkBench workload generator: load sizes, shufflers, distributions, the mix."""

from __future__ import annotations

import collections
import hashlib
import itertools
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest

from bench.linkbench.access import AccessModel
from bench.linkbench.config import (
    DEFAULT_LINK_TYPE,
    GET_LINKS_LIST,
    OPERATIONS,
    RANGE_LIMIT,
    Workload,
)
from bench.linkbench.datagen import MotifData
from bench.linkbench.distributions import Geometric, LogNormal, Zipf
from bench.linkbench.id2chooser import Id2Chooser
from bench.linkbench.jrandom import JavaRandom
from bench.linkbench.load import count_links, generate_links, generate_nodes
from bench.linkbench.realdist import DATA_FILE, NLinks, load_cdfs
from bench.linkbench.requests import RequestGenerator, Shared, requester_rng
from bench.linkbench.sha1prng import thread_seeds
from bench.linkbench.shuffler import GROUPS, NLINKS_SEED, InvertibleShuffler


def test_the_distribution_file_is_linkbenchs() -> None:
    assert hashlib.md5(DATA_FILE.read_bytes()).hexdigest() == "362af7859a99a97f4f51ed98f4d3915e"
    cdfs = load_cdfs()
    assert set(cdfs) == {"nlinks", "link_nreads", "link_nwrites", "node_nreads", "node_nwrites"}
    values, probs = cdfs["nlinks"]
    assert probs == sorted(probs)
    assert probs[-1] == 1.0
    assert values[-1] == 961_963


def test_the_load_of_ids_1_to_4_writes_961966_links() -> None:
    # The reference's number (with its link-type split quirk): the hub takes
    # 961,963 links split 480,982 + 480,982, two ids take one link each.
    assert count_links(Workload(maxid1=5)) == 961_966
    chooser = Id2Chooser(Workload(maxid1=5))
    assert [chooser.total_link_count(i) for i in range(1, 5)] == [961_963, 1, 1, 0]


def test_the_fixed_split_writes_the_drawn_degrees() -> None:
    assert count_links(Workload(maxid1=5, quirks=False)) == 961_965
    chooser = Id2Chooser(Workload(maxid1=5, quirks=False))
    assert [chooser.link_count(1, t) for t in chooser.link_types()] == [480_982, 480_981]


def test_generated_links_follow_the_counts() -> None:
    # The loader walks chunks of 2,048 ids last chunk first: [4097, 5001),
    # then [2049, 4097), ...; 20,000 links cover the first chunk whole.
    w = Workload(maxid1=5_001)
    links = list(itertools.islice(generate_links(w, seed=3), 20_000))
    assert links[0].id1 == 4_097
    last = links[-1].id1
    per_list = collections.Counter((k.id1, k.link_type) for k in links if k.id1 != last)
    chooser = Id2Chooser(w)
    expected = {
        (i, t): chooser.link_count(i, t)
        for i in {k.id1 for k in links} - {last}
        for t in chooser.link_types()
        if chooser.link_count(i, t)
    }
    assert per_list == expected
    assert len(expected) > 100


def test_load_links_have_linkbench_ids_times_and_sizes() -> None:
    links = list(itertools.islice(generate_links(Workload(maxid1=5), seed=3), 20_000))
    hub = [k for k in links if k.id1 == 1 and k.link_type == DEFAULT_LINK_TYPE]
    assert [k.id2 for k in hub] == list(range(1, len(hub) + 1))  # id2 = id1 + j
    sizes = sorted(len(k.data) for k in links)
    assert sizes[len(sizes) // 2] == 8  # log-normal with median 8
    assert max(sizes) <= 254
    assert all(32 <= b <= 100 for k in links[:500] for b in k.data)
    times = [k.time for k in links]
    assert max(times) - min(times) > 2**31  # spread over ~50 days


def test_load_is_reproducible_from_the_seed() -> None:
    w = Workload(maxid1=50)
    a = list(itertools.islice(generate_links(w, seed=9), 2000))
    b = list(itertools.islice(generate_links(w, seed=9), 2000))
    c = list(itertools.islice(generate_links(w, seed=10), 2000))
    strip = [(k.id1, k.link_type, k.id2, k.data) for k in a]
    assert strip == [(k.id1, k.link_type, k.id2, k.data) for k in b]
    assert strip != [(k.id1, k.link_type, k.id2, k.data) for k in c]
    nodes = list(generate_nodes(w, seed=9))
    assert [n.id for n in nodes] == list(range(1, 50))
    assert all(len(n.data) >= 1 for n in nodes)


@pytest.mark.parametrize("n", [1, 3, 1000, 1024, 1025, 5000, 100_000])
def test_shuffler_is_an_invertible_permutation(n: int) -> None:
    s = InvertibleShuffler(NLINKS_SEED, GROUPS, n)
    image = [s.permute(i) for i in range(n)]
    assert sorted(image) == list(range(n))
    assert all(s.invert(image[i]) == i for i in range(n))


def test_shuffler_moves_ids_once_groups_have_two_members() -> None:
    # Below 2 * 1024 ids every group has one member: the reference's shuffle
    # is then the identity, and rank r is id startid1 + r.
    assert all(InvertibleShuffler(NLINKS_SEED, GROUPS, 2000).permute(i) == i for i in range(2000))
    s = InvertibleShuffler(NLINKS_SEED, GROUPS, 100_000)
    assert sum(s.permute(i) == i for i in range(100_000)) < 2_000


def test_nlinks_gives_the_top_rank_the_biggest_hub() -> None:
    nl = NLinks(1, 100_001)
    assert nl.expected(1) == 961_963
    assert nl.expected(100_000) == 0
    assert nl.expected(0) == nl.expected(100_001) == 0


def test_zipf_favours_low_ranks_with_the_configured_shape() -> None:
    z = Zipf(1, 100_001, 0.8)
    rng = JavaRandom(1)
    draws = collections.Counter(z.choose(rng) for _ in range(50_000))
    assert min(draws) == 1
    assert max(draws) <= 100_000
    # P(rank 1) = 1 / zetan; rank k's frequency falls as k^-0.8.
    assert draws[1] / 50_000 == pytest.approx(1 / z.zetan, rel=0.1)
    assert draws[1] / draws[2] == pytest.approx(2**0.8, rel=0.15)
    assert z.quantile(0.0) == 1
    assert z.quantile(0.999999999) <= 100_000


def test_geometric_multiget_sizes() -> None:
    # The reference adds min = 1 to a geometric that already starts at 1, so
    # a multiget asks for 2 or more ids (mean ~3.6, not the ~2.6 intended).
    quirky, fixed = Geometric(1, 128, 0.382), Geometric(1, 128, 0.382, from_min=True)
    for g, low, mean in ((quirky, 2, 1 + 1 / 0.382), (fixed, 1, 1 / 0.382)):
        rng = JavaRandom(2)
        sizes = [g.choose(rng) for _ in range(20_000)]
        assert min(sizes) == low
        assert max(sizes) <= 127
        assert sum(sizes) / len(sizes) == pytest.approx(mean, rel=0.05)


def test_lognormal_median_and_clamp() -> None:
    d = LogNormal(0, 255, 8, 1.0)
    rng = JavaRandom(3)
    sizes = sorted(d.choose(rng) for _ in range(20_001))
    assert sizes[10_000] == 8
    assert sizes[-1] <= 254
    assert sizes[0] >= 0


def test_motif_data_reuses_motifs() -> None:
    gen = MotifData(32, 100, 0.0, 512)  # uniqueness 0: every chunk from the motifs
    out = gen.fill(JavaRandom(4), 300)
    assert len(out) == 300
    assert all(32 <= b <= 100 for b in out)
    assert gen._motifs is not None
    assert out[:128] in gen._motifs


def test_quirks_switch_changes_the_write_blend() -> None:
    quirky = AccessModel.build(Workload(maxid1=10_001))
    fixed = AccessModel.build(Workload(maxid1=10_001, quirks=False))
    assert quirky.link_writes.blend == pytest.approx(0.995)
    assert quirky.link_writes.other is not None
    assert quirky.link_writes.other.dist.shape == 0.8
    assert fixed.link_writes.blend == pytest.approx(0.95)
    assert fixed.link_writes.other is not None
    assert fixed.link_writes.other.dist.shape == 0.741
    assert Workload(quirks=True).motif_length(Workload().link_add_datagen) == 512
    assert Workload(quirks=False).motif_length(Workload().link_add_datagen) == 128


def test_the_stream_is_reproducible_and_depends_on_the_seed() -> None:
    shared = Shared(Workload(maxid1=10_001))

    def stream(seed: int) -> list[tuple[object, ...]]:
        gen = RequestGenerator(shared, requester_rng(seed))
        return [
            (op.kind, op.id1, op.link_type, op.id2, tuple(op.id2s), op.data)
            for op in (gen.next() for _ in range(2000))
        ]

    assert stream(5) == stream(5)
    assert stream(5) != stream(6)


def test_history_pages_back_after_a_full_page() -> None:
    shared = Shared(Workload(maxid1=10_001))
    gen = RequestGenerator(shared, requester_rng(7))
    ops = (gen.next() for _ in range(200_000))
    first = next(op for op in ops if op.kind == GET_LINKS_LIST)
    gen.observe_list(first, RANGE_LIMIT, 12345)  # a full page: remember its oldest link
    paging = next(op for op in ops if op.kind == GET_LINKS_LIST and op.history >= 0)
    assert (paging.id1, paging.link_type, paging.max_time, paging.offset) == (
        first.id1,
        first.link_type,
        12345,
        1,
    )
    gen.observe_list(paging, 17, 100)  # a short page: nothing more to read there
    assert gen.history == []


def _mix(seed: int, n: int) -> collections.Counter[str]:
    gen = RequestGenerator(Shared(Workload(maxid1=100_001)), requester_rng(seed))
    return collections.Counter(gen.next().kind for _ in range(n))


def test_a_million_requests_follow_the_configured_mix() -> None:
    # Two requesters of 500,000 requests each (as the reference would run
    # them), one per core: generating requests in Python costs ~20 µs each.
    n = 1_000_000
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=spawn) as pool:
        seen = sum(pool.map(_mix, thread_seeds(11, 2), [n // 2] * 2), collections.Counter())
    assert sum(seen.values()) == n
    mix = Workload().mix
    for op in OPERATIONS:
        # within 1 percentage point of the mix (the largest, 50.7%, has sd 0.05)
        assert abs(100 * seen[op] / n - mix[op]) < 1.0, op
        assert seen[op] / n == pytest.approx(mix[op] / 100, rel=0.05), op
