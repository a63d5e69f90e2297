"""Timelines in write, read and hybrid mode, checked against a plain model.

The model follows the documented rules: a post is delivered to the author's
followers at the time of the post (unless the author is a celebrity in
hybrid mode), a delete to everyone who ever followed; a home list keeps the
`cap` newest keys it received (tombstones of items it held included), and
tombstones of items it never held while among its `cap` newest keys; reads
skip deleted items and items of authors the user no longer follows; read mode
(and the celebrity part of hybrid) sees every live post of the current
followees.
"""

from __future__ import annotations

import os
import random
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import assocdb
from assocdb import Graph, InvalidCursor, InvalidRequest, NotFound, TimelineItem
from assocdb.api import timelines as _timelines
from assocdb.core.timeline_list import entry
from assocdb.writes.fanout import FanoutJob, fanout_page
from assocdb.writes.journal import Journal
from tests.conftest import OpenGraph

Key = tuple[int, int]  # (time, item)
REDIS = os.environ.get("ASSOCDB_TEST_REDIS_URL")


@dataclass
class Model:
    mode: str
    cap: int
    threshold: int
    follows: dict[int, set[int]] = field(default_factory=dict)  # user -> authors
    ever: dict[int, set[int]] = field(default_factory=dict)  # author -> users who ever followed
    posts: dict[tuple[int, int], tuple[int, bool]] = field(default_factory=dict)  # -> (time, live)
    homes: dict[int, dict[Key, tuple[int, bool]]] = field(default_factory=dict)  # -> (author, live)
    counted: dict[int, set[Key]] = field(default_factory=dict)  # the keys a home list received
    stars: set[int] = field(default_factory=set)

    def followers(self, author: int) -> set[int]:
        return {u for u, authors in self.follows.items() if author in authors}

    def follow(self, user: int, author: int) -> None:
        self.follows.setdefault(user, set()).add(author)
        self.ever.setdefault(author, set()).add(user)

    def unfollow(self, user: int, author: int) -> None:
        self.follows.get(user, set()).discard(author)
        self.ever.setdefault(author, set()).add(user)  # a tombstone edge stays

    def _deliver(self, users: set[int], key: Key, author: int, live: bool) -> None:
        for user in users:
            home = self.homes.setdefault(user, {})
            home[key] = (author, live)
            # A tombstone of an item the list never held is loose: it takes no slot,
            # and stays while among the `cap` newest keys.
            received = self.counted.setdefault(user, set())
            if live or key in received:
                received.add(key)
            newest = sorted(home, reverse=True)
            kept = {k for k in newest if k in received}
            kept = set(sorted(kept, reverse=True)[: self.cap]) | set(newest[: self.cap])
            for old in set(newest) - kept:
                del home[old]
                received.discard(old)

    def post(self, author: int, item: int, time: int) -> None:
        held = self.posts.get((author, item))
        if held is not None and held[1]:
            time = held[0]  # posting a live item again keeps its first time
        self.posts[(author, item)] = (time, True)
        if self.mode == "hybrid" and len(self.followers(author)) > self.threshold:
            self.stars.add(author)
        if self.mode == "write" or (self.mode == "hybrid" and author not in self.stars):
            self._deliver(self.followers(author), (time, item), author, True)

    def delete(self, author: int, item: int) -> None:
        time, _ = self.posts[(author, item)]
        self.posts[(author, item)] = (time, False)
        if self.mode != "read":
            self._deliver(self.ever.get(author, set()), (time, item), author, False)

    def _own(self, authors: set[int]) -> set[tuple[int, int, int]]:
        return {(t, i, a) for (a, i), (t, live) in self.posts.items() if live and a in authors}

    def home(self, user: int, mode: str) -> list[TimelineItem]:
        following = self.follows.get(user, set())
        if mode == "read":
            rows = self._own(following)
        else:
            home = self.homes.get(user, {})
            rows = {(t, i, a) for (t, i), (a, live) in home.items() if live and a in following}
            if mode == "hybrid":
                rows |= self._own(following & self.stars)
        return [TimelineItem(i, a, t) for t, i, a in sorted(rows, reverse=True)]


def walk(g: Graph, user: int, mode: str, limit: int) -> list[TimelineItem]:
    """Every item of a home timeline, paging forward; checks each page's backward cursor."""
    items: list[TimelineItem] = []
    cursor = None
    while True:
        page = g.home_timeline(user, cursor, limit, mode)  # type: ignore[arg-type]
        assert len(page.items) <= limit
        if items:
            assert page.prev_cursor is not None
            back = g.home_timeline(user, page.prev_cursor, limit, mode)  # type: ignore[arg-type]
            assert back.items == items[-len(back.items) :]
        items += page.items
        if page.next_cursor is None:
            return items
        cursor = page.next_cursor


def setup(g: Graph, mode: str, cap: int = 800, threshold: int = 5) -> Model:
    g.define_assoc("follows", inverse="followed_by")
    g.define_timeline("follows", mode=mode, cap=cap, celebrity_threshold=threshold)  # type: ignore[arg-type]
    return Model(mode, cap, threshold)


def run_ops(
    g: Graph, model: Model, rnd: random.Random, steps: int, users: int = 20, reads: bool = False
) -> None:
    """Random follows (a few celebrities draw most), unfollows, posts and deletes.

    With `reads`, each step ends with a read of its user's first page (so a
    cache holds home lists while deliveries change them)."""
    stars = [1, 2]
    items = iter(range(1000, 10**6))
    for _ in range(steps):
        roll = rnd.random()
        user = rnd.randint(1, users)
        if roll < 0.3:
            author = rnd.choice(stars) if rnd.random() < 0.5 else rnd.randint(1, users)
            past = [
                a
                for a, us in model.ever.items()
                if user in us and a not in model.follows.get(user, set())
            ]
            if past and rnd.random() < 0.5:
                author = rnd.choice(sorted(past))  # following again, after an unfollow
            if author != user:
                g.assoc_add(user, "follows", author)
                model.follow(user, author)
        elif roll < 0.45 and model.follows.get(user):
            author = rnd.choice(sorted(model.follows[user]))
            g.assoc_delete(user, "follows", author)
            model.unfollow(user, author)
        elif roll < 0.8:
            item, time = next(items), rnd.randint(1, 40)  # equal times: ties by item
            author = rnd.choice(stars) if rnd.random() < 0.3 else user
            if model.posts and rnd.random() < 0.25:  # again (a retry with its own clock)
                author, item = rnd.choice(sorted(model.posts))
            g.post(author, item, time)
            model.post(author, item, time)
        else:
            live = sorted(k for k, (_, alive) in model.posts.items() if alive)
            if live:
                author, item = rnd.choice(live)
                g.post_delete(author, item)
                model.delete(author, item)
        assert g.drain(10)
        if reads:
            first = g.home_timeline(user, None, 4, model.mode)  # type: ignore[arg-type]
            assert first.items == model.home(user, model.mode)[:4], user


#: The caches a model test runs with: none, tier 1, tier 1 and Redis (when configured).
CACHES = {
    "uncached": None,
    "cached": assocdb.CacheConfig(
        prefix=4, admit_after=1, max_age=3600
    ),  # short prefixes: partly cached
    "redis": assocdb.CacheConfig(prefix=4, admit_after=1, max_age=3600, redis=REDIS),
}


@pytest.mark.parametrize("mode", ["write", "read", "hybrid"])
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("cache", list(CACHES))
def test_home_timelines_match_the_model(
    open_graph: OpenGraph, mode: str, seed: int, cache: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if cache == "redis" and not REDIS:
        pytest.skip("ASSOCDB_TEST_REDIS_URL is not set")
    # Seed 2 reads the shards on threads, seed 1 inline: the same answers either way.
    monkeypatch.setattr(_timelines, "PARALLEL_READS", "always" if seed == 2 else "never")
    g = open_graph(cache=CACHES[cache])
    model = setup(g, mode, cap=6 if seed == 1 else 30, threshold=3)  # trimmed often, or seldom
    rnd = random.Random(seed)
    # Cached, every step reads a page: deliveries change home lists the cache holds.
    run_ops(g, model, rnd, 150, reads=cache != "uncached")
    if mode == "hybrid":
        assert model.stars  # the generated graph has celebrities
    for user in range(1, 21):
        assert walk(g, user, mode, 4) == model.home(user, mode), user
        if mode != "hybrid":
            continue
        # The other modes over the same store: read sees everything, write the lists.
        assert walk(g, user, "read", 7) == model.home(user, "read")
        assert walk(g, user, "write", 7) == model.home(user, "write")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 10**6),
    mode=st.sampled_from(["write", "read", "hybrid"]),
    cached=st.booleans(),
)
def test_random_operation_orders(tmp_path: Path, seed: int, mode: str, cached: bool) -> None:
    cache = assocdb.CacheConfig(prefix=4) if cached else None  # short prefixes: partly cached
    with assocdb.open(tempfile.mkdtemp(dir=tmp_path), shards=3, cache=cache) as g:
        model = setup(g, mode, cap=4, threshold=2)
        run_ops(g, model, random.Random(seed), 40, users=8)
        for user in range(1, 9):
            assert walk(g, user, mode, 3) == model.home(user, mode)


@pytest.mark.parametrize("mode", ["write", "hybrid"])
def test_an_item_posted_again_with_another_time_is_one_entry_gone_when_deleted(
    graph: Graph, mode: str
) -> None:
    graph.define_timeline("follows", mode=mode)  # type: ignore[arg-type]
    graph.assoc_add(8, "follows", 7)
    graph.post(7, 1001, time=1000)
    graph.drain()
    graph.post(7, 1001, time=5000)
    graph.drain()
    assert graph.home_timeline(8).items == [TimelineItem(1001, 7, 1000)]
    assert graph.user_timeline(7).items == [TimelineItem(1001, 7, 1000)]
    graph.post_delete(7, 1001)
    graph.drain()
    assert graph.home_timeline(8).items == []
    assert graph.user_timeline(7).items == []
    graph.post(7, 1001, time=9000)  # posted again after its delete: a new post, its new time
    graph.drain()
    assert graph.home_timeline(8).items == [TimelineItem(1001, 7, 9000)]


def test_unfollow_hides_delivered_items_and_refollow_shows_them(graph: Graph) -> None:
    graph.define_timeline("follows")
    graph.assoc_add(2, "follows", 1)
    graph.post(1, 100, 10)
    graph.drain()
    assert [i.item for i in graph.home_timeline(2).items] == [100]
    graph.assoc_delete(2, "follows", 1)
    assert graph.home_timeline(2).items == []
    assert graph.home_timeline(2, mode="read").items == []
    graph.assoc_add(2, "follows", 1)
    assert [i.item for i in graph.home_timeline(2).items] == [100]


def test_delete_reaches_past_followers(graph: Graph) -> None:
    graph.define_timeline("follows")
    graph.assoc_add(2, "follows", 1)
    graph.post(1, 100, 10)
    graph.drain()
    graph.assoc_delete(2, "follows", 1)
    graph.post_delete(1, 100)
    graph.assoc_add(2, "follows", 1)
    graph.drain()
    assert graph.home_timeline(2).items == []
    assert graph.user_timeline(1).items == []


def test_a_delete_reaches_a_follower_who_comes_back_during_its_fan_out(graph: Graph) -> None:
    """A re-follow between two reads of the followers, one state each, hid the
    follower from both: the deleted item stayed in their home timeline."""
    graph.define_timeline("follows")
    graph.assoc_add(2, "follows", 1)
    graph.post(1, 100, 10)
    graph.drain()
    graph.assoc_delete(2, "follows", 1)
    backend = graph.engine.backend
    refollowed: list[object] = []

    class RefollowAfterTheFirstRead:
        def __getattr__(self, name: str) -> object:
            return getattr(backend, name)

        def scan(self, *args: Any) -> Any:
            return self.refollow(backend.scan(*args))

        def scan_id2(self, *args: Any) -> Any:
            return self.refollow(backend.scan_id2(*args))

        def refollow(self, rows: Any) -> Any:
            if not refollowed:
                refollowed.append(graph.assoc_add(2, "follows", 1))
            return rows

    followers = graph.engine.schema.inverse(graph.engine.assoc_type("follows"))
    assert followers is not None
    tombstone = entry(10, 100, 1, graph.engine.stamp(None), deleted=True)
    job: FanoutJob | None = FanoutJob(
        1, followers.id, _timelines._ALL_STATES, tombstone, graph.timeline_config().cap
    )
    while job is not None:
        job = fanout_page(RefollowAfterTheFirstRead(), job)  # type: ignore[arg-type]
    assert refollowed
    graph.engine.forget()
    assert graph.home_timeline(2).items == []


@pytest.mark.parametrize("mode", ["write", "read", "hybrid"])
def test_paging_is_stable_while_items_arrive(graph: Graph, mode: str) -> None:
    graph.define_timeline("follows", mode=mode, celebrity_threshold=1)  # type: ignore[arg-type]
    for author in (1, 2, 3):
        graph.assoc_add(10, "follows", author)
        graph.assoc_add(11, "follows", author)  # 1..3 have two followers: celebrities in hybrid
    for n in range(30):
        graph.post(1 + n % 3, 100 + n, 1000 + n)
    graph.drain()
    first = graph.home_timeline(10, limit=7)
    for n in range(30, 40):  # newer items arrive between pages
        graph.post(1 + n % 3, 100 + n, 1000 + n)
    graph.drain()
    rest, cursor = [], first.next_cursor
    while cursor is not None:
        page = graph.home_timeline(10, cursor, 7)
        rest += page.items
        cursor = page.next_cursor
    seen = [i.item for i in first.items + rest]
    assert seen == list(range(129, 99, -1))  # no duplicates, no gaps, none of the new
    assert first.prev_cursor is None
    newer = graph.home_timeline(10, graph.home_timeline(10, first.next_cursor, 7).prev_cursor, 50)
    assert [i.item for i in newer.items] == list(range(139, 122, -1))


def test_reposting_keeps_the_time_and_delivers_once(graph: Graph) -> None:
    graph.define_timeline("follows")
    graph.assoc_add(2, "follows", 1)
    graph.post(1, 100, 10)
    graph.post(1, 100)
    graph.drain()
    assert graph.home_timeline(2).items == [TimelineItem(100, 1, 10)]
    assert graph.user_timeline(1).items == [TimelineItem(100, 1, 10)]


def test_the_cap_keeps_the_newest(graph: Graph) -> None:
    graph.define_timeline("follows", cap=5)
    graph.assoc_add(2, "follows", 1)
    for n in range(12):
        graph.post(1, 100 + n, n)
    graph.drain()
    assert [i.item for i in graph.home_timeline(2).items] == [111, 110, 109, 108, 107]
    assert len(graph.home_timeline(2, mode="read").items) == 12


def test_deleting_a_post_a_home_list_never_received_keeps_its_items(graph: Graph) -> None:
    """The delete of an item is fanned out to everyone who follows (or followed) its
    author; a full home list that never received the item must not lose a live item
    to its tombstone."""
    graph.define_timeline("follows", cap=3)
    graph.assoc_add(2, "follows", 1)
    for n in range(3):
        graph.post(1, 100 + n, 10 * (n + 1))  # times 10, 20, 30: the list is full
    graph.post(3, 200, 15)  # 2 does not follow 3 yet: never delivered to 2
    graph.drain()
    graph.assoc_add(2, "follows", 3)
    graph.post_delete(3, 200)
    graph.drain()
    assert [i.item for i in graph.home_timeline(2).items] == [102, 101, 100]
    graph.engine.forget()  # the shard's list too, not only the cached one
    assert [i.item for i in graph.home_timeline(2).items] == [102, 101, 100]


def test_deleting_a_celebritys_post_keeps_the_followers_home_items(graph: Graph) -> None:
    """In hybrid mode a celebrity's items are merged in at read time, never delivered;
    their deletes are fanned out all the same and must not cost a follower an item."""
    graph.define_timeline("follows", mode="hybrid", cap=3, celebrity_threshold=1)
    graph.assoc_add(2, "follows", 1)
    graph.assoc_add(2, "follows", 3)
    graph.assoc_add(4, "follows", 3)  # 3 has two followers: a celebrity
    for n in range(3):
        graph.post(1, 100 + n, 10 * (n + 1))
    graph.post(3, 200, 15)
    graph.drain()
    assert [i.item for i in graph.home_timeline(2).items] == [102, 101, 200, 100]
    graph.post_delete(3, 200)
    graph.drain()
    assert [i.item for i in graph.home_timeline(2).items] == [102, 101, 100]
    graph.engine.forget()
    assert [i.item for i in graph.home_timeline(2).items] == [102, 101, 100]


def test_fanout_resumes_from_its_recorded_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fan-out job that stopped mid-way (a crash, a failed shard) continues where it got to."""
    path = tmp_path / "g"
    with assocdb.open(path, shards=4) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.define_timeline("follows")
        for user in range(2, 52):
            g.assoc_add(user, "follows", 1, time=user)  # followers list: 51 (newest) … 2
        followers = g.schema.assoc_type("followed_by").id
        g.post(1, 7, 5)  # fanned out fully: the baseline every follower has
        assert g.drain(10)
    # A crash after the first 20 followers (51 … 32) were done: the journal holds
    # the job with its progress; reopening replays it from there.
    job = FanoutJob(1, followers, [0], entry(9, 8, 1, 10**15), 800, at=(0, 32, 32))
    journal = Journal(path / "journal.db")
    journal.append(msgspec.msgpack.encode(job))
    journal.close()
    with assocdb.open(path) as g:
        assert g.drain(10)
        for user in range(2, 52):
            items = [i.item for i in g.home_timeline(user).items]
            assert items == ([8, 7] if user < 32 else [7]), user


def test_a_shard_that_is_down_delays_only_its_own_followers(
    graph: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    import assocdb.writes.fanout
    from assocdb.core.ids import shard_of

    monkeypatch.setattr(assocdb.writes.fanout, "FANOUT_PAGE", 10)
    graph.define_timeline("follows")
    for user in range(2, 52):
        graph.assoc_add(user, "follows", 1)
    down = shard_of(2, graph.shards)

    def shard_down(shard: int, sql: str) -> None:
        if shard == down and "timelines" in sql:
            raise sqlite3.OperationalError("disk I/O error")

    graph.engine.backend.faults.append(shard_down)  # type: ignore[attr-defined]
    graph.post(1, 100, 10)
    assert not graph.drain(1)
    stuck = graph.queue_jobs("error")
    assert stuck
    assert {job.operation["kind"] for job in stuck} == {"Deliveries"}  # the fan-out went on
    for user in range(2, 52):
        if shard_of(user, graph.shards) == down:
            with pytest.raises(assocdb.Unavailable):
                graph.home_timeline(user)
        else:
            assert [i.item for i in graph.home_timeline(user).items] == [100], user
    graph.engine.backend.faults.clear()  # type: ignore[attr-defined]
    graph.queue_retry()
    assert graph.drain(10)
    for user in range(2, 52):
        assert [i.item for i in graph.home_timeline(user).items] == [100]


def test_celebrities_are_read_fanned_and_stay_so(graph: Graph) -> None:
    graph.define_timeline("follows", mode="hybrid", celebrity_threshold=2)
    for user in (2, 3, 4):
        graph.assoc_add(user, "follows", 1)
    graph.post(1, 100, 10)
    graph.drain()
    assert graph.home_timeline(2, mode="write").items == []  # not fanned out
    assert [i.item for i in graph.home_timeline(2).items] == [100]  # merged at read time
    graph.assoc_delete(3, "follows", 1)
    graph.assoc_delete(4, "follows", 1)
    graph.post(1, 101, 11)  # under the threshold now, but still a celebrity
    graph.drain()
    assert [i.item for i in graph.home_timeline(2).items] == [101, 100]
    assert graph.home_timeline(2, mode="write").items == []


def test_bad_requests_are_refused(graph: Graph) -> None:
    with pytest.raises(InvalidRequest, match="define_timeline"):
        graph.post(1, 2)
    with pytest.raises(InvalidRequest, match="inverse"):
        graph.define_timeline("likes")
    with pytest.raises(assocdb.UnknownType):
        graph.define_timeline("nope")
    with pytest.raises(InvalidRequest, match="mode"):
        graph.define_timeline("follows", mode="sideways")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="cap"):
        graph.define_timeline("follows", cap=0)
    with pytest.raises(InvalidRequest, match="celebrity_threshold"):
        graph.define_timeline("follows", celebrity_threshold=-1)
    with pytest.raises(InvalidRequest, match="posts"):
        graph.define_timeline("follows", posts="followed_by")
    graph.define_timeline("follows")
    with pytest.raises(InvalidRequest, match="author"):
        graph.post(0, 2)
    with pytest.raises(InvalidRequest, match="item"):
        graph.post(1, "x")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="time"):
        graph.post(1, 2, 2**63)
    with pytest.raises(NotFound, match="has not posted"):
        graph.post_delete(1, 2)
    for limit in (0, 1001, "5"):
        with pytest.raises(InvalidRequest, match="limit"):
            graph.home_timeline(1, limit=limit)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="mode"):
        graph.home_timeline(1, mode="both")  # type: ignore[arg-type]
    with pytest.raises(InvalidCursor):
        graph.home_timeline(1, cursor="garbage")
    graph.assoc_add(1, "follows", 3)
    graph.post(3, 5, 1)
    graph.post(3, 6, 2)
    graph.drain()
    cursor = graph.home_timeline(1, limit=1).next_cursor
    assert cursor is not None
    with pytest.raises(InvalidCursor, match="not issued"):
        graph.home_timeline(2, cursor=cursor)  # another user's cursor
    assert graph.user_timeline(3).items == [TimelineItem(6, 3, 2), TimelineItem(5, 3, 1)]
    assert graph.timeline_config() == assocdb.TimelineConfig()


def test_a_post_does_not_wait_for_its_fanout(graph: Graph) -> None:
    graph.define_timeline("follows")
    graph.bulk_load((user, "follows", 1) for user in range(2, 30_002))
    graph.post(1, 100, 10)
    assert graph.queue_stats().depth > 0  # 30,000 deliveries still under way
    assert graph.drain(60)
    for user in (2, 15_000, 30_001):
        assert [i.item for i in graph.home_timeline(user).items] == [100]


def test_background_writes_post_too(tmp_path: Path) -> None:
    with assocdb.open(tmp_path / "g", shards=2, sync=False) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.define_timeline("follows")
        g.assoc_add(2, "follows", 1)
        assert g.drain(10)
        assert g.post(1, 100, 10).status == "queued"
        assert g.drain(10)
        assert g.home_timeline(2).items == [TimelineItem(100, 1, 10)]


def test_a_cached_read_fanout_issues_no_sql(graph: Graph) -> None:
    graph.define_timeline("follows", mode="read")
    for author in range(2, 12):
        graph.assoc_add(1, "follows", author)
        graph.post(author, 100 + author, author)
    first = graph.home_timeline(1, limit=5)
    assert graph.home_timeline(1, limit=5) == first  # each list's second miss fills it
    statements: list[str] = []
    undo = graph.trace(lambda shard, sql, seconds: statements.append(sql))
    again = graph.home_timeline(1, limit=5)
    undo()
    assert again == first
    assert [i.item for i in again.items] == [111, 110, 109, 108, 107]
    assert statements == []  # the followees and their lists came from the cache
    graph.post_delete(11, 111)  # and the cache follows writes
    assert [i.item for i in graph.home_timeline(1, limit=5).items] == [110, 109, 108, 107, 106]


def test_times_at_the_ends_of_int64_pass_through_the_cache(graph: Graph) -> None:
    graph.define_timeline("follows")
    graph.assoc_add(1, "follows", 2)
    graph.post(2, 100, 5)
    assert [i.item for i in graph.user_timeline(2).items] == [100]  # the list is now cached
    graph.post(2, 101, 2**63 - 1)
    graph.post(2, 102, -(2**63) + 1)  # the smallest time (-2^63 bounds ranges and cursors)
    graph.drain()
    want = [
        TimelineItem(101, 2, 2**63 - 1),
        TimelineItem(100, 2, 5),
        TimelineItem(102, 2, -(2**63) + 1),
    ]
    assert graph.user_timeline(2).items == want
    assert graph.home_timeline(1).items == want
    assert graph.home_timeline(1, mode="read").items == want


def test_the_time_minus_2_to_the_63_is_refused(graph: Graph) -> None:
    graph.define_timeline("follows")
    with pytest.raises(InvalidRequest, match="-2\\^63\\+1"):
        graph.post(2, 102, -(2**63))
    with pytest.raises(InvalidRequest, match="-2\\^63\\+1"):
        graph.assoc_add(1, "follows", 2, time=-(2**63))
    with pytest.raises(InvalidRequest, match="-2\\^63\\+1"):
        graph.bulk_load([(1, "follows", 2, -(2**63))])


def test_define_timeline_keeps_an_existing_posts_type_as_it_is(graph: Graph) -> None:
    graph.define_assoc("posted", limit=100)
    graph.define_timeline("follows")
    assert graph.schema.assoc_type("posted").limit == 100
    graph.define_timeline("follows", posts="shared")  # a new one is defined
    assert graph.schema.assoc_type("shared").limit == 6000


def test_an_item_deleted_in_read_mode_stays_deleted_in_write_mode(graph: Graph) -> None:
    graph.define_timeline("follows", mode="write")
    graph.assoc_add(2, "follows", 1)
    graph.post(1, 100, 10)
    graph.post(1, 101, 11)
    assert graph.drain(10)
    graph.define_timeline("follows", mode="read")
    graph.post_delete(1, 100)
    assert graph.drain(10)
    assert [i.item for i in graph.home_timeline(2).items] == [101]
    graph.define_timeline("follows", mode="write")  # the home lists are read again
    assert [i.item for i in graph.home_timeline(2).items] == [101]
    assert [i.item for i in graph.home_timeline(2, mode="hybrid").items] == [101]


def test_hybrid_reads_with_many_celebrities_look_up_the_smaller_side(graph: Graph) -> None:
    from array import array

    graph.define_timeline("follows", mode="hybrid", celebrity_threshold=0)
    stars = array("q", range(10_000, 30_000)).tobytes()  # 20,000 celebrities
    graph.engine.backend.swap_meta("timeline_celebrities", None, stars)
    graph.assoc_add(1, "follows", 15_000)
    graph.post(15_000, 7, 1)
    assert graph.drain(10)
    statements: list[str] = []
    undo = graph.trace(lambda shard, sql, seconds: statements.append(sql))
    page = graph.home_timeline(1)
    undo()
    assert [i.item for i in page.items] == [7]
    assert len(statements) < 10  # not one lookup per 500 celebrities


def test_hybrid_reads_that_read_the_follows_see_every_followed_celebrity(graph: Graph) -> None:
    from array import array

    graph.define_timeline("follows", mode="hybrid", celebrity_threshold=100)
    stars = array("q", range(10_000, 13_000)).tobytes()  # 3,000 celebrities
    graph.engine.backend.swap_meta("timeline_celebrities", None, stars)
    authors = [10_001, 11_500, 12_999, 5, 6]  # three celebrities, two who fan out
    for n, author in enumerate(authors):
        graph.assoc_add(1, "follows", author)
        graph.post(author, 100 + n, n)
    graph.post(10_002, 999, 99)  # a celebrity user 1 does not follow
    assert graph.drain(10)
    want = [104, 103, 102, 101, 100]
    assert [i.item for i in graph.home_timeline(1).items] == want
    assert [i.item for i in graph.home_timeline(1, mode="read").items] == want


def test_a_cached_home_page_issues_no_sql(open_graph: OpenGraph) -> None:
    g = open_graph(cache=assocdb.CacheConfig(admit_after=1, max_age=3600))
    g.define_assoc("follows", inverse="followed_by")
    g.define_timeline("follows", mode="write")
    for author in range(2, 12):
        g.assoc_add(1, "follows", author)
        g.post(author, 100 + author, author)
    assert g.drain(10)
    first = g.home_timeline(1, limit=5)
    statements: list[str] = []
    undo = g.trace(lambda shard, sql, seconds: statements.append(sql))
    again = g.home_timeline(1, limit=5)
    second = g.home_timeline(1, first.next_cursor, limit=5)
    undo()
    assert again == first
    assert [i.item for i in second.items] == [106, 105, 104, 103, 102]
    assert statements == []  # the home list and the follow edges came from the cache
    g.post(12, 150, 50)  # a new followee's post: a delivery into the cached home list
    assert g.drain(10)  # fanned out (to no one) before the follow: fan-out runs in the background
    g.assoc_add(1, "follows", 12)
    g.post(12, 112, 12)
    g.post_delete(11, 111)  # and a tombstone
    assert g.drain(10)
    statements.clear()
    undo = g.trace(lambda shard, sql, seconds: statements.append(sql))
    items = [i.item for i in g.home_timeline(1, limit=5).items]
    undo()
    assert items == [112, 110, 109, 108, 107]  # 150 came before the follow
    assert not any("timelines" in sql for sql in statements)  # updated in place, not refilled


@pytest.mark.skipif(not REDIS, reason="ASSOCDB_TEST_REDIS_URL is not set")
def test_another_process_sees_deliveries_through_redis(tmp_path: Path) -> None:
    cache = assocdb.CacheConfig(
        redis=REDIS, admit_after=1, max_age=3600
    )  # only Redis can tell the reader
    writer = assocdb.open(tmp_path / "g", shards=3, cache=cache)
    writer.define_assoc("follows", inverse="followed_by")
    writer.define_timeline("follows")
    for user in range(2, 6):
        writer.assoc_add(user, "follows", 1)
    reader = assocdb.open(tmp_path / "g", cache=cache)
    try:
        for n in range(5):
            writer.post(1, 100 + n, 10 + n)
            assert writer.drain(10)
            assert reader.engine.cache.tier2.wait_for(writer.engine.cache.tier2.barrier())  # type: ignore[union-attr]
            for user in range(2, 6):
                items = [i.item for i in reader.home_timeline(user).items]
                assert items == list(range(100 + n, 99, -1)), (n, user)
        third = assocdb.open(tmp_path / "g", cache=cache)
        statements: list[str] = []
        third.trace(lambda shard, sql, seconds: statements.append(sql))
        for user in range(2, 6):
            assert third.home_timeline(user, limit=1).items[0].item == 104
        third.close()
        # The reader's fills, shared through Redis (a new graph reads its timeline config).
        assert [sql for sql in statements if "FROM meta" not in sql] == []
    finally:
        reader.close()
        writer.close()


def test_a_home_fill_older_than_a_delivery_is_not_cached(tmp_path: Path) -> None:
    g = assocdb.open(
        tmp_path / "g", shards=2, cache=assocdb.CacheConfig(admit_after=1, max_age=3600)
    )
    g.define_assoc("follows", inverse="followed_by")
    g.define_timeline("follows")
    g.assoc_add(2, "follows", 1)
    g.post(1, 100, 10)
    assert g.drain(10)
    read, release = threading.Event(), threading.Event()
    backend = g.engine.backend
    stored = backend.timelines

    def slow(shard: int, owners: list[int]) -> dict[int, bytes]:
        found = stored(shard, owners)
        if threading.current_thread().name == "reader":
            read.set()  # the fill has the blob without item 101...
            release.wait(5)
        return found

    backend.timelines = slow  # type: ignore[method-assign]
    reading = threading.Thread(target=lambda: g.home_timeline(2), name="reader")
    reading.start()
    assert read.wait(5)
    g.post(1, 101, 11)  # ...and this delivery lands before it is installed
    assert g.drain(10)
    release.set()
    reading.join()
    backend.timelines = stored  # type: ignore[method-assign]
    assert [i.item for i in g.home_timeline(2).items] == [101, 100]
    stats = g.cache_stats()
    assert stats is not None
    assert stats.stale_fills == 1
    g.close()


def test_cached_home_lists_stay_within_the_memory_bound(tmp_path: Path) -> None:
    cache = assocdb.CacheConfig(max_bytes=40_000, admit_after=1, max_age=3600)
    g = assocdb.open(tmp_path / "g", shards=2, cache=cache)
    g.define_assoc("follows", inverse="followed_by")
    g.define_timeline("follows")
    for user in range(2, 42):
        g.assoc_add(user, "follows", 1)
    for item in range(100, 130):  # 30 entries: about 1 KB a home list
        g.post(1, item, item)
    assert g.drain(10)
    for _ in range(2):
        for user in range(2, 42):
            assert [i.item for i in g.home_timeline(user, limit=3).items] == [129, 128, 127]
            stats = g.cache_stats()
            assert stats is not None
            assert stats.bytes <= 40_000
    assert stats.evictions > 0
    assert g.engine.cache is not None
    g.engine.cache.invalidate()
    assert g.engine.cache._home_bytes == 0
    assert g.engine.cache.stats().bytes == 0
    g.close()
