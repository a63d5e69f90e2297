"""The load phase: the nodes and links LinkBench's loaders write before the requests.

Links: every id1 in [startid1, maxid1) gets, per link type, the share of
its out-degree that `Id2Chooser.link_count` gives it, to id2s `id1 + j`.
Each link draws a log-normal data size (median 8 bytes), its payload, and
a time up to ~50 days back (`now - 2^31 + nextInt()` ms). The reference's
single loader walks the ids in chunks of 2,048, last chunk first, all from
one `java.util.Random`; this port does the same, so payloads and times
match a one-loader reference run with the same `load_random_seed`.

Nodes: ids [startid1, maxid1), each with a log-normal size (median 128,
at least 1 byte) and payload, from the node loader's own generator.

`count_links` adds up the out-degrees without generating anything, which is
what the 961,966 check of ids 1..4 uses.
"""

from __future__ import annotations

import time as _time
from collections.abc import Iterator
from typing import NamedTuple

from .config import DEFAULT_NODE_TYPE, MAX_LINK_DATA, MAX_NODE_DATA, Workload
from .datagen import MotifData
from .distributions import LogNormal
from .id2chooser import Id2Chooser
from .jrandom import JavaRandom
from .sha1prng import thread_seeds

CHUNK = 2048  # loader_chunk_size's default


class LoadLink(NamedTuple):
    id1: int
    link_type: int
    id2: int
    time: int
    data: bytes


class LoadNode(NamedTuple):
    id: int
    type: int
    version: int
    time: int
    data: bytes


def count_links(workload: Workload) -> int:
    """How many links the load phase writes, without generating them."""
    chooser = Id2Chooser(workload)
    return sum(
        chooser.link_count(id1, t)
        for id1 in range(workload.startid1, workload.maxid1)
        for t in chooser.link_types()
    )


def load_seeds(seed: int) -> tuple[int, int]:
    """(node loader seed, link loader seed) that the reference derives from `load_random_seed`."""
    node_seed, link_seed = thread_seeds(seed, 2)
    return node_seed, link_seed


def generate_links(workload: Workload, seed: int) -> Iterator[LoadLink]:
    """Every loaded link, in the order a single reference loader generates them."""
    chooser = Id2Chooser(workload)
    rng = JavaRandom(load_seeds(seed)[1])
    size = LogNormal(0, MAX_LINK_DATA, workload.link_datasize, workload.link_datasize_sigma)
    gen = workload.link_add_datagen
    payload = MotifData(gen.start, gen.end, gen.uniqueness, workload.motif_length(gen))
    types = chooser.link_types()
    start, end = workload.startid1, workload.maxid1
    chunks = list(range(start, end, CHUNK))
    for chunk_start in reversed(chunks):  # the reference queues chunks last-first
        now_ms = _time.time_ns() // 1_000_000
        for id1 in range(chunk_start, min(chunk_start + CHUNK, end)):
            for link_type in types:
                for j in range(chooser.link_count(id1, link_type)):
                    data = payload.fill(rng, size.choose(rng))
                    when = now_ms - (1 << 31) + rng.next_int()
                    yield LoadLink(id1, link_type, id1 + j, when, data)


def generate_nodes(workload: Workload, seed: int) -> Iterator[LoadNode]:
    """Every loaded node, ids startid1 .. maxid1 - 1."""
    rng = JavaRandom(load_seeds(seed)[0])
    size = LogNormal(1, MAX_NODE_DATA, workload.node_datasize, workload.node_datasize_sigma)
    gen = workload.node_add_datagen
    payload = MotifData(gen.start, gen.end, gen.uniqueness, workload.motif_length(gen))
    now_s = _time.time_ns() // 1_000_000_000
    for node_id in range(workload.startid1, workload.maxid1):
        data = payload.fill(rng, size.choose(rng))
        yield LoadNode(node_id, DEFAULT_NODE_TYPE, 1, now_s, data)
