"""FlockDB's integration scenarios over Thrift, against a real `assocdb serve-thrift`.

The scenarios are FlockDB's own (src/test/scala/.../integration: EdgesSpec,
IntersectionSpec, SelectCompilerSpec), with its expected pages and cursors.
The servers are real processes: `serve-thrift` and the HTTP `serve` on the
same graph directory. Each scenario is also done through `assocdb.Client`
on nodes of its own (ids + CLIENT), and the two must read the same through
both protocols. Graph 1 is `follows` (schema id 1), graph 3 `blocks`.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import assocdb
from assocdb import Client
from tests.support.helpers import wait_until
from tests.support.http_server import Server
from tests.support.thrift_server import Flock, ThriftServer, pack

thriftpy2 = pytest.importorskip("thriftpy2")

ADD, REMOVE, ARCHIVE, NEGATE = 1, 2, 3, 4
SIMPLE, INTERSECTION, UNION, DIFFERENCE = 1, 2, 3, 4
POSITIVE, REMOVED, ARCHIVED, NEGATIVE = 0, 1, 2, 3
LOW, HIGH = 1, 3
FOLLOWS = 1
CLIENT = 500  # the Client's copy of a scenario uses these ids + CLIENT


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ThriftServer, Server]]:
    directory: Path = tmp_path_factory.mktemp("flock") / "graph"
    with assocdb.open(directory, shards=4) as g:
        g.define_assoc("follows", inverse="followed_by")  # schema ids 1 and 2
        g.define_assoc("blocks")  # 3: no inverse
    thrift = ThriftServer(directory, "--no-cache")
    http = Server(directory, False, "--no-cache")
    yield thrift, http
    assert thrift.stop() == 0  # SIGTERM closes the graph and exits cleanly
    http.stop()


_bases = itertools.count(1)


@pytest.fixture
def base() -> int:
    """Node ids of this test start after this (tests share the servers)."""
    return next(_bases) * 10_000


@pytest.fixture
def flock(servers: tuple[ThriftServer, Server]) -> Iterator[Flock]:
    client = servers[0].client()
    yield Flock(client)
    client.close()


@pytest.fixture
def rest(servers: tuple[ThriftServer, Server]) -> Iterator[Client]:
    with Client(servers[1].url) as client:
        yield client


def followings(f: Flock, node: int) -> list[Any]:
    return f.simple(f.term(node))


def followers(f: Flock, node: int) -> list[Any]:
    return f.simple(f.term(node, forward=False))


def add(f: Flock, a: int, b: int, position: int | None = None, priority: int = HIGH) -> None:
    f.execute(ADD, f.term(a, ids=[b]), position, priority)


# -- EdgesSpec -----------------------------------------------------------------------------


def test_metadata(flock: Flock, rest: Client, base: int) -> None:
    alice, bob = base + 1, base + 2
    assert not flock.c.contains_metadata(alice, FOLLOWS)
    with pytest.raises(flock.m.FlockException, match="Record not found"):
        flock.c.get_metadata(alice, FOLLOWS)
    add(flock, alice, bob)
    rest.assoc_add(alice + CLIENT, "follows", bob + CLIENT)
    for node in (alice, alice + CLIENT):
        assert flock.c.contains_metadata(node, FOLLOWS)
        # updated_at is the node state's: a node never archived has FlockDB's epoch row
        assert flock.c.get_metadata(node, FOLLOWS) == flock.m.Metadata(node, POSITIVE, 1, 0)
    assert flock.c.contains_metadata(bob, -FOLLOWS)  # the backward table: bob's followers
    assert rest.node_state(alice, "follows") == "normal"


def test_add_then_remove(flock: Flock, rest: Client, base: int) -> None:
    alice, bob = base + 1, base + 2
    add(flock, alice, bob)
    only_bob = flock.simple(flock.term(alice, ids=[bob], states=[POSITIVE]))
    assert flock.select(only_bob, 1)[0] == [bob]
    assert rest.assoc_contains(alice, "follows", bob)
    flock.execute(REMOVE, flock.term(alice, ids=[bob]))
    assert flock.select(only_bob, 1) == ([], 0, 0)
    assert flock.count(followings(flock, alice)) == 0
    edge = flock.c.get(alice, FOLLOWS, bob)
    assert edge.state_id == REMOVED
    stored = rest.assoc_edge(alice, "follows", bob)
    assert stored is not None
    assert stored.state == "removed"
    assert edge.updated_at == stored.updated_at // 1_000_000


def test_a_graph_that_does_not_exist(flock: Flock, base: int) -> None:
    with pytest.raises(flock.m.FlockException, match="no graph 900"):
        flock.execute(ADD, flock.term(base + 1, graph=900, ids=[base + 2]))
    with pytest.raises(flock.m.FlockException, match="no graph 900"):
        flock.c.contains(base + 1, 900, base + 2)
    # blocks (3) has no inverse: its backward direction is not stored
    with pytest.raises(flock.m.FlockException, match="no backward direction"):
        flock.select(flock.simple(flock.term(base + 1, graph=3, forward=False)), 10)


def test_remove_of_an_edge_that_never_was(flock: Flock, rest: Client, base: int) -> None:
    alice, bob = base + 1, base + 2
    flock.execute(REMOVE, flock.term(bob, ids=[alice]))
    rest.assoc_delete(bob + CLIENT, "follows", alice + CLIENT)
    for offset in (0, CLIENT):
        assert not flock.c.contains(bob + offset, FOLLOWS, alice + offset)
        assert flock.count(followings(flock, alice + offset)) == 0
        assert flock.count(followers(flock, alice + offset)) == 0
        assert rest.assoc_count(bob + offset, "follows", "removed") == 1


def _counts(f: Flock, alice: int, others: list[int], darcy: int) -> list[int]:
    return [
        f.count(followings(f, alice)),
        f.count(followers(f, alice)),
        *[f.count(followers(f, other)) for other in others],
        f.count(followings(f, darcy)),
    ]


def test_archive_and_unarchive_a_node(flock: Flock, rest: Client, base: int) -> None:
    alice, bob, carl, darcy = base + 1, base + 2, base + 3, base + 4
    for a, b in [(alice, bob), (alice, carl), (alice, darcy), (darcy, alice)]:
        add(flock, a, b)
        rest.assoc_add(a + CLIENT, "follows", b + CLIENT)
    for o in (0, CLIENT):
        assert _counts(flock, alice + o, [bob + o, carl + o, darcy + o], darcy + o) == [
            3,
            1,
            1,
            1,
            1,
            1,
        ]
    both = [(ARCHIVE, flock.term(alice), None), (ARCHIVE, flock.term(alice, forward=False), None)]
    flock.executes(both)
    rest.node_archive(alice + CLIENT, "follows", direction="both")
    for o in (0, CLIENT):
        wait_until(lambda o=o: _counts(flock, alice + o, [bob + o], darcy + o) == [0] * 4)
        assert flock.c.get_metadata(alice + o, FOLLOWS).state_id == ARCHIVED
        assert rest.node_state(alice + o, "follows") == "archived"
    both = [(ADD, flock.term(alice), None), (ADD, flock.term(alice, forward=False), None)]
    flock.executes(both)
    rest.node_unarchive(alice + CLIENT, "follows", direction="both")
    for o in (0, CLIENT):
        wait_until(
            lambda o=o: (
                _counts(flock, alice + o, [bob + o, carl + o, darcy + o], darcy + o)
                == [3, 1, 1, 1, 1, 1]
            )
        )
    assert flock.c.get_metadata(alice, FOLLOWS) == flock.m.Metadata(
        alice, POSITIVE, 3, rest.assoc_edge(alice, "follows", bob).updated_at // 1_000_000
    )


def test_archive_and_unarchive_concurrently(flock: Flock, rest: Client, base: int) -> None:
    alice, bob, carl, darcy = base + 1, base + 2, base + 3, base + 4
    for other in (bob, carl, darcy):
        add(flock, alice, other)
    later = int(time.time()) + 2
    flock.executes(
        [(ADD, flock.term(alice), None), (ADD, flock.term(alice, forward=False), None)], at=later
    )
    flock.executes(
        [(ARCHIVE, flock.term(alice), None), (ARCHIVE, flock.term(alice, forward=False), None)],
        at=later - 1,
    )
    # the archive's background job, if any, has run (the servers share the journal)
    wait_until(lambda: rest.queue_stats().depth == 0)
    assert flock.count(followings(flock, alice)) == 3
    assert [flock.count(followers(flock, o)) for o in (bob, carl, darcy)] == [1, 1, 1]


def test_unarchive_restores_archived_edges_in_order(flock: Flock, rest: Client, base: int) -> None:
    """FlockFixRegressionSpec, "in order and still in order after unarchive": edges to
    0..9 at rising positions, the even ones added and the odd ones archived one by one;
    unarchiving the node (never archived) brings back all ten in position order. Edges
    removed one by one stay removed (FlockDB never revives a removed edge)."""
    alice = base + 1
    friends = [base + 100 + i for i in range(10)]
    gone = [base + 200 + i for i in range(3)]
    for i, other in enumerate(friends):
        op = ADD if i % 2 == 0 else ARCHIVE
        flock.execute(op, flock.term(alice, ids=[other]), 1_000 + 10 * i)
        rest.assoc_add(alice + CLIENT, "follows", other + CLIENT, time=1_000 + 10 * i)
        if op == ARCHIVE:
            rest.assoc_archive(alice + CLIENT, "follows", other + CLIENT)
    for i, other in enumerate(gone):  # between the others
        add(flock, alice, other, position=1_005 + 20 * i)
        flock.execute(REMOVE, flock.term(alice, ids=[other]))
        rest.assoc_add(alice + CLIENT, "follows", other + CLIENT, time=1_005 + 20 * i)
        rest.assoc_delete(alice + CLIENT, "follows", other + CLIENT)
    newest_first = friends[::-1]
    for o in (0, CLIENT):
        assert flock.everything(followings(flock, alice + o), 100) == [
            f + o for f in newest_first[1::2]
        ]
    flock.execute(ADD, flock.term(alice))  # FlockDB's Unarchive job
    rest.node_unarchive(alice + CLIENT, "follows")
    for o in (0, CLIENT):
        wait_until(lambda o=o: flock.count(followings(flock, alice + o)) == 10)
        wait_until(lambda o=o: rest.assoc_count(alice + o, "follows") == 10)
        assert flock.everything(followings(flock, alice + o), 100) == [f + o for f in newest_first]
        assert [a.id2 for a in rest.assoc_range(alice + o, "follows")] == [
            f + o for f in newest_first
        ]
        assert rest.assoc_count(alice + o, "follows", "removed") == 3
        assert not any(flock.c.contains(alice + o, FOLLOWS, g + o) for g in gone)


def test_toggle_polarity(flock: Flock, rest: Client, base: int) -> None:
    alice = base + 1
    for other in (base + 2, base + 3, base + 4):
        add(flock, alice, other)
        rest.assoc_add(alice + CLIENT, "follows", other + CLIENT)
    negative = flock.simple(flock.term(alice, states=[NEGATIVE]))
    flock.execute(NEGATE, flock.term(alice))
    rest.node_negate(alice + CLIENT, "follows")
    wait_until(lambda: flock.count(negative) == 3)
    assert flock.count(followings(flock, alice)) == 0
    wait_until(lambda: rest.assoc_count(alice + CLIENT, "follows", "negative") == 3)
    assert flock.c.contains(alice, FOLLOWS, base + 2)  # negative edges are contained
    flock.execute(ADD, flock.term(alice))
    wait_until(lambda: flock.count(followings(flock, alice)) == 3)
    assert flock.count(negative) == 0


def test_counts(flock: Flock, base: int) -> None:
    alice, bob, carl, darcy = base + 1, base + 2, base + 3, base + 4
    flock.executes([(ADD, flock.term(alice, ids=[bob, carl, darcy]), None)])
    packed = flock.c.count2(
        [followers(flock, bob), followers(flock, carl), followers(flock, darcy)]
    )
    assert struct.unpack("<3i", packed) == (1, 1, 1)


def test_select_edges(flock: Flock, rest: Client, base: int) -> None:
    alice, bob, carl, darcy = base + 1, base + 2, base + 3, base + 4
    add(flock, alice, bob, position=1_000)
    add(flock, alice, carl, position=2_000)
    query = flock.m.EdgeQuery(flock.term(alice), flock.m.Page(10, -1))
    (results,) = flock.c.select_edges([query])
    assert (results.next_cursor, results.prev_cursor) == (0, 0)
    assert [(e.destination_id, e.position) for e in results.edges] == [(carl, 2_000), (bob, 1_000)]
    stored = rest.assoc_range(alice, "follows")
    assert [(a.id2, a.time, a.updated_at // 1_000_000) for a in stored] == [
        (e.destination_id, e.position, e.updated_at) for e in results.edges
    ]
    query = flock.m.EdgeQuery(flock.term(alice, ids=[carl, darcy]), flock.m.Page(10, -1))
    (results,) = flock.c.select_edges([query])
    assert [e.destination_id for e in results.edges] == [carl]
    assert (results.next_cursor, results.prev_cursor) == (0, 0)


# -- IntersectionSpec and SelectCompilerSpec ------------------------------------------------


def test_intersection_pages(flock: Flock, rest: Client, base: int) -> None:
    alice, bob, carl, darcy = base + 1, base + 2, base + 3, base + 4
    for a, b in [(alice, bob), (alice, carl), (alice, darcy), (carl, bob), (carl, darcy)]:
        add(flock, a, b)
    both = [*followings(flock, alice), *followings(flock, carl), flock.op(INTERSECTION)]
    assert flock.select(both, 1) == ([darcy], darcy, 0)
    assert flock.select(both, 1, darcy) == ([bob], 0, -bob)
    assert flock.select(both, 2) == ([darcy, bob], 0, 0)
    assert flock.select(both, 1, -bob) == ([darcy], darcy, 0)  # and back
    same = rest.select(alice, "follows") & rest.select(carl, "follows")
    assert same.page(limit=10).items == [darcy, bob]
    assert flock.count(both) == same.count().value == 2


def test_an_empty_intersection(flock: Flock, base: int) -> None:
    alice, carl = base + 1, base + 3
    flock.executes([(ADD, flock.term(alice, ids=[base + i for i in range(1, 11)]), None)])
    assert flock.count(followings(flock, alice)) == 10
    both = [*followings(flock, alice), *followings(flock, carl), flock.op(INTERSECTION)]
    assert flock.select(both, 10) == ([], 0, 0)


def test_difference_pages(flock: Flock, rest: Client, base: int) -> None:
    alice, bob = base + 100, base + 200
    ids = [base + i for i in range(1, 11)]
    flock.executes([(ADD, flock.term(alice, ids=ids), None)])
    flock.executes([(ADD, flock.term(bob, ids=[base + 2 * i for i in range(1, 7)]), None)])
    program = [*followings(flock, alice), *followings(flock, bob), flock.op(DIFFERENCE)]
    b = base
    assert flock.select(program, 10) == ([b + 9, b + 7, b + 5, b + 3, b + 1], 0, 0)
    assert flock.select(program, 2) == ([b + 9, b + 7], b + 7, 0)
    assert flock.select(program, 2, b + 7) == ([b + 5, b + 3], b + 3, -(b + 5))
    assert flock.select(program, 2, b + 3) == ([b + 1], 0, -(b + 1))
    assert flock.select(program, 2, -(b + 5)) == ([b + 9, b + 7], b + 7, 0)
    left = rest.select(alice, "follows") - rest.select(bob, "follows")
    assert left.page(limit=10).items == flock.select(program, 10)[0]


def test_union_pages(flock: Flock, rest: Client, base: int) -> None:
    a, b = base + 100, base + 200
    flock.executes([(ADD, flock.term(a, ids=[base + 1, base + 3]), None)])
    flock.executes([(ADD, flock.term(b, ids=[base + 2, base + 3]), None)])
    program = [*followings(flock, a), *followings(flock, b), flock.op(UNION)]
    assert flock.select(program, 2) == ([base + 3, base + 2], base + 2, 0)
    assert flock.select(program, 2, base + 2) == ([base + 1], 0, -(base + 1))
    union = rest.select(a, "follows") | rest.select(b, "follows")
    assert flock.everything(program, 1) == union.page(limit=10).items


# -- select by position, both ways -----------------------------------------------------------


def test_select_by_position_both_ways(flock: Flock, rest: Client, base: int) -> None:
    alice = base + 1
    for n in range(1, 8):
        add(flock, alice, base + 10 + n, position=100 * n)  # positions 100 … 700
        rest.assoc_add(alice + CLIENT, "follows", base + 10 + n + CLIENT, time=100 * n)
    q = followings(flock, alice)
    assert flock.select(q, 3) == ([base + 17, base + 16, base + 15], 500, 0)
    assert flock.select(q, 3, 500) == ([base + 14, base + 13, base + 12], 200, -400)
    assert flock.select(q, 3, 200) == ([base + 11], 0, -100)
    assert flock.select(q, 3, -100) == ([base + 14, base + 13, base + 12], 200, -400)
    assert flock.select(q, 3, -400) == ([base + 17, base + 16, base + 15], 500, 0)
    assert flock.select(q, 3, 0) == ([], 0, 0)
    mirror = flock.everything(followings(flock, alice + CLIENT), 2)
    assert mirror == [i + CLIENT for i in flock.everything(q, 2)]
    assert rest.select(alice, "follows").page(limit=10).items == flock.everything(q, 3)
    assert flock.select(followers(flock, base + 13), 5) == ([alice], 0, 0)


def test_equal_positions_are_never_skipped(flock: Flock, base: int) -> None:
    alice = base + 1
    positions = [50, 50, 50, 40, 30, 30, 30, 30, 20, 10]  # 1 would read as -1 going back
    for n, position in enumerate(positions):
        add(flock, alice, base + 10 + n, position=position)
    q = followings(flock, alice)
    everyone = flock.select(q, 100)[0]
    assert len(everyone) == 10
    for count in (1, 2, 3):
        forward, cursor = [], -1
        pages = []
        while True:
            ids, cursor, prev = flock.select(q, count, cursor)
            pages.append((ids, prev))
            forward += ids
            if cursor == 0:
                break
        assert forward == everyone
        back = list(pages[-1][0])  # and back up from the last page
        cursor = pages[-1][1]
        while cursor != 0:
            ids, _, cursor = flock.select(q, count, cursor)
            back = ids + back
        assert back == everyone


def test_states_and_priority_low(flock: Flock, rest: Client, base: int) -> None:
    alice = base + 1
    ids = [base + i for i in range(2, 7)]
    flock.executes([(ADD, flock.term(alice, ids=ids), 10)], priority=LOW)
    wait_until(lambda: rest.assoc_count(alice, "follows") == 5)
    flock.execute(ARCHIVE, flock.term(alice, ids=[base + 3]))
    flock.execute(NEGATE, flock.term(alice, ids=[base + 4]))
    hidden = flock.simple(flock.term(alice, states=[ARCHIVED, NEGATIVE]))
    # The low-priority adds are applied in the background of the Thrift server's
    # process: one of them may still be pending there (applied, not yet released)
    # when a state change of its edge comes, which is then acknowledged as queued
    # and applied by the retrier.
    wait_until(lambda: sorted(flock.select(hidden, 10)[0]) == [base + 3, base + 4])
    assert flock.count(hidden) == 2
    got = rest.select(alice, "follows", states=["archived", "negative"]).page(limit=10).items
    assert sorted(got) == [base + 3, base + 4]
    assert flock.count(followings(flock, alice)) == rest.assoc_count(alice, "follows") == 3
    assert not flock.c.contains(alice, FOLLOWS, base + 3)
    assert flock.c.get(alice, FOLLOWS, base + 3).state_id == ARCHIVED
    flock.execute(ADD, flock.term(alice, ids=[base + 3]), position=999)
    assert flock.c.get(alice, FOLLOWS, base + 3).position == 10  # a live edge keeps its position


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda f, n: f.select(f.simple(f.term(n)), 10, -(2**63)), "bad cursor"),
        (lambda f, n: f.select(f.simple(f.term(n)), -1), "count must be"),
        (lambda f, n: f.select(f.simple(f.term(n, states=[7])), 10), "unknown state id 7"),
        (lambda f, n: f.select(f.simple(f.term(n, graph=77)), 10), "no graph 77"),
        (lambda f, n: f.select([f.op(INTERSECTION)], 10), "Need two sub-queries"),
        (lambda f, n: f.select(f.simple(f.term(n)) * 2, 10), "Left 2 items"),
        (lambda f, n: f.select([f.m.SelectOperation(9, None)], 10), "Unknown operation 9"),
        (lambda f, n: f.select(f.simple(f.term(0)), 10), "node must be"),
        (lambda f, n: f.executes([]), "at least one operation"),
        (lambda f, n: f.execute(7, f.term(n, ids=[2])), "Unknown operation 7"),
        (lambda f, n: f.execute(ADD, f.term(n, ids=[2]), priority=9), "priority must be"),
        (lambda f, n: f.execute(ADD, f.term(n, ids=[-5])), "id2 must be"),
        (lambda f, n: f.execute(ADD, f.term(n, ids=[2]), at=2**31 - 1), "in the future"),
        (lambda f, n: f.c.get(n, FOLLOWS, n + 1), "Record not found"),
    ],
)
def test_bad_input_is_a_flock_exception(flock: Flock, base: int, call: Any, message: str) -> None:
    with pytest.raises(flock.m.FlockException, match=message):
        call(flock, base + 1)
    assert flock.c.contains(base + 1, FOLLOWS, base + 2) is False  # the server is still there


def test_bad_destination_ids(flock: Flock, base: int) -> None:
    term = flock.m.QueryTerm(base + 1, FOLLOWS, True, b"\x01\x02\x03", None)
    with pytest.raises(flock.m.FlockException, match="8 bytes each"):
        flock.select(flock.simple(term), 10)
    assert flock.count(flock.simple(flock.term(base + 1, ids=[]))) == 0
    assert pack([1]) == struct.pack("<q", 1)


def test_several_processes_serve_one_port(
    servers: tuple[ThriftServer, Server], flock: Flock, base: int
) -> None:
    thrift, http = servers
    second = ThriftServer(http.directory, "--no-cache", port=thrift.port)
    try:
        add(flock, base + 1, base + 2)  # through one process or the other
        clients = [Flock(second.client()) for _ in range(8)]  # spread over both
        assert all(f.c.contains(base + 1, FOLLOWS, base + 2) for f in clients)
        for f in clients:
            add(f, base + 1, base + 3)
            f.c.close()
    finally:
        assert second.stop() == 0
    assert flock.count(followings(flock, base + 1)) == 2


def test_a_frame_over_the_limit_closes_its_connection(
    servers: tuple[ThriftServer, Server], flock: Flock, base: int
) -> None:
    """A 4-byte header declaring a huge frame is refused before its body is read
    (thriftpy2 alone would allocate and buffer up to 2 GiB of it)."""
    from assocdb.flock.frames import MAX_FRAME

    with socket.create_connection(("127.0.0.1", servers[0].port), timeout=30) as raw:
        raw.sendall(struct.pack("!i", MAX_FRAME + 1) + b"\x00" * 1024)
        # The server closes: end of file (or a reset, for the bytes it left unread).
        with contextlib.suppress(ConnectionResetError):
            assert raw.recv(1) == b""
    add(flock, base + 1, base + 2)  # other connections are served
    assert flock.c.contains(base + 1, FOLLOWS, base + 2) is True


def test_frames_longer_than_a_read_buffer(flock: Flock, base: int) -> None:
    """Frames of many reads each (here 80 kB of ids) pass the frame size check."""
    ids = list(range(base + 2, base + 2 + 10_000))
    add(flock, base + 1, ids[0])
    assert flock.count(flock.simple(flock.term(base + 1, ids=ids))) == 1
    assert flock.count(flock.simple(flock.term(base + 1, ids=ids[:3]))) == 1


def test_a_frame_of_too_many_values_closes_its_connection(
    servers: tuple[ThriftServer, Server], flock: Flock, base: int
) -> None:
    """`count` with a list of a million empty structs (a byte each): thriftpy2 would
    build a million objects (a 16 MiB frame of them took 2.8 GB and 24 s)."""
    n = 1_000_000
    name = b"count"
    message = struct.pack("!Ii", 0x80010001, len(name)) + name + struct.pack("!i", 1)
    message += struct.pack("!bhbi", 15, 1, 12, n) + b"\x00" * n + b"\x00"
    with socket.create_connection(("127.0.0.1", servers[0].port), timeout=30) as raw:
        raw.sendall(struct.pack("!i", len(message)) + message)
        with contextlib.suppress(ConnectionResetError):
            assert raw.recv(1) == b""  # closed, not answered
    assert flock.count(followings(flock, base + 1)) == 0  # other connections are served


# -- connections: how many, and how long ---------------------------------------------------

LIMIT = 8


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThriftServer]:
    """A server of at most LIMIT connections, frames within 1 s (idle ones may stay)."""
    directory: Path = tmp_path_factory.mktemp("guarded") / "graph"
    with assocdb.open(directory, shards=1) as g:
        g.define_assoc("follows", inverse="followed_by")
    limits = ("--max-connections", str(LIMIT), "--frame-timeout", "1")
    server = ThriftServer(directory, "--no-cache", *limits)
    yield server
    assert server.stop() == 0


def _closed_by_server(raw: socket.socket) -> bool:
    """Whether the server closed `raw` (its 30 s timeout only turns a hang into a failure)."""
    raw.settimeout(30)
    try:
        return raw.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _answers(server: ThriftServer) -> bool:
    """Whether a new connection is served."""
    try:
        client = server.client()
    except thriftpy2.transport.TTransportException:
        return False
    f = Flock(client)
    try:
        return f.count(f.simple(f.term(1))) == 0
    except (thriftpy2.transport.TTransportException, OSError):
        return False
    finally:
        client.close()


def test_connections_past_the_limit_are_closed(guarded: ThriftServer) -> None:
    """LIMIT idle connections take every place; one more is closed at once (not given
    a thread), and once one of the LIMIT closes, well-behaved clients are served."""
    idle = [socket.create_connection(("127.0.0.1", guarded.port)) for _ in range(LIMIT)]
    try:
        with socket.create_connection(("127.0.0.1", guarded.port)) as extra:
            assert _closed_by_server(extra)  # accepted after the LIMIT, so refused
        idle.pop().close()
        wait_until(lambda: _answers(guarded), patience=30)
    finally:
        for raw in idle:
            raw.close()


@pytest.mark.parametrize("sent", [b"\x00\x00", struct.pack("!i", 100) + b"\x80\x01"])
def test_a_frame_that_stops_coming_closes_its_connection(
    guarded: ThriftServer, sent: bytes
) -> None:
    """A slow loris: part of a header, or a header and part of its frame, then nothing."""
    with socket.create_connection(("127.0.0.1", guarded.port)) as raw:
        raw.sendall(sent)
        assert _closed_by_server(raw)
    wait_until(lambda: _answers(guarded), patience=30)


def test_an_idle_connection_is_closed_after_the_idle_timeout(tmp_path: Path) -> None:
    directory = tmp_path / "graph"
    with assocdb.open(directory, shards=1) as g:
        g.define_assoc("follows")
    server = ThriftServer(directory, "--no-cache", "--idle-timeout", "0.5")
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as raw:
            assert _closed_by_server(raw)
        assert _answers(server)
    finally:
        assert server.stop() == 0
