"""Cascading deletions (api/deletions.py): declared rules, the job, restore, purge."""

from __future__ import annotations

import logging

import msgspec
import pytest

import assocdb
from assocdb import Graph, InvalidRequest, NotFound, SchemaError
from assocdb.core.deletion import BATCH_OBJECTS
from assocdb.core.ids import shard_of
from assocdb.core.timeline_list import is_deleted, unpack
from tests.conftest import OpenGraph
from tests.support.helpers import wait_until


def social(g: Graph) -> Graph:
    """People who follow each other, author posts (deep), and albums holding
    shared photos (refcount); comments are owned."""
    g.define_assoc("follows", inverse="followed_by", on_delete="shallow")
    g.define_assoc("followed_by", inverse="follows", on_delete="shallow")
    g.define_assoc("authored", inverse="author", on_delete="deep")
    g.define_assoc("author", inverse="authored", on_delete="shallow")
    g.define_assoc("owns_album", inverse="album_of", on_delete="deep")
    g.define_assoc("album_of", inverse="owns_album", on_delete="shallow")
    g.define_assoc("contains", inverse="in_album", on_delete="refcount")
    g.define_assoc("in_album", inverse="contains", on_delete="shallow")
    g.define_assoc("likes", on_delete="shallow")
    for otype in ("user", "post", "album", "photo"):
        g.define_object(otype, owned=otype in ("post", "photo"))
    return g


@pytest.fixture
def g(open_graph: OpenGraph) -> Graph:
    return social(open_graph())


def test_the_schema_keeps_each_types_rule(g: Graph) -> None:
    assert g.schema.assoc_type("authored").on_delete == "deep"
    assert g.schema.assoc_type("author").on_delete == "shallow"
    assert g.schema.object_type("post").owned
    g.define_assoc("authored", inverse="author")  # no rule given: kept
    assert g.schema.assoc_type("authored").on_delete == "deep"
    with pytest.raises(SchemaError, match="on_delete must be one of"):
        g.define_assoc("x", on_delete="cascade")  # type: ignore[arg-type]
    with pytest.raises(SchemaError, match="needs an inverse"):
        g.define_assoc("y", on_delete="refcount")


def test_a_cascade_removes_edges_both_ways_deep_targets_and_orphans(g: Graph) -> None:
    ada, bob = g.obj_add("user", {"n": "ada"}), g.obj_add("user", {"n": "bob"})
    post = g.obj_add("post", {"t": "hi"})
    a1, a2 = g.obj_add("album"), g.obj_add("album")
    shared, own = g.obj_add("photo"), g.obj_add("photo")
    bobs_album = g.obj_add("album")
    g.assoc_add(ada, "follows", bob, time=5, data={"since": 2020})
    g.assoc_add(bob, "follows", ada, time=6)
    g.assoc_add(ada, "authored", post, time=7)
    g.assoc_add(bob, "likes", post, time=8)
    g.assoc_add(ada, "owns_album", a1)
    g.assoc_add(ada, "owns_album", a2)
    g.assoc_add(a1, "contains", shared)
    g.assoc_add(a2, "contains", own)
    g.assoc_add(bob, "owns_album", bobs_album)
    g.assoc_add(bobs_album, "contains", shared)

    g.obj_delete(ada, cascade=True)
    assert g.obj_get(ada) is None  # at once
    assert g.deletions.wait(30)

    for gone in (ada, post, a1, a2, own):
        assert g.obj_get(gone) is None
    assert g.obj_get(shared) is not None  # bob's album still holds it
    assert g.obj_get(bob) is not None
    assert g.assoc_count(bob, "follows") == 0
    assert g.assoc_count(bob, "followed_by") == 0
    assert g.assoc_count(shared, "in_album") == 1
    report = g.deletions.of_object(ada)
    assert report.status == "done"
    assert report.objects == {"album": 2, "photo": 1, "post": 1, "user": 1}
    # bob's like of the post has no inverse: not found from the post; it dangles
    assert report.edges["follows"] == 1
    assert report.edges["followed_by"] == 1

    restored = g.obj_restore(ada)
    assert restored.status == "restored"
    assert g.obj_get(ada).data == {"n": "ada"}  # type: ignore[union-attr]
    assert g.obj_get(own) is not None
    assert g.obj_get(post) is not None
    edge = g.assoc_edge(ada, "follows", bob)
    assert edge is not None
    assert edge.time == 5
    assert edge.data == {"since": 2020}
    assert g.assoc_count(bob, "followed_by") == 1
    assert g.assoc_count(bob, "follows") == 1
    assert g.assoc_count(shared, "in_album") == 2
    with pytest.raises(InvalidRequest, match="restored already"):
        g.obj_restore(ada)


def test_restore_brings_back_only_what_the_deletion_removed(g: Graph) -> None:
    ada, bob, cy = (g.obj_add("user") for _ in range(3))
    g.assoc_add(ada, "follows", bob)
    g.assoc_add(ada, "follows", cy)
    g.assoc_delete(ada, "follows", cy)  # removed before: stays removed
    g.obj_delete(ada, cascade=True)
    assert g.deletions.wait(30)
    g.obj_restore(ada)
    assert [a.id2 for a in g.assoc_range(ada, "follows")] == [bob]
    assert g.assoc_count(cy, "followed_by") == 0


def test_unknown_objects_and_restores_are_refused(g: Graph) -> None:
    with pytest.raises(NotFound):
        g.obj_delete(12345, cascade=True)
    uid = g.obj_add("user")
    with pytest.raises(NotFound, match="never deleted"):
        g.obj_restore(uid)


def test_the_window_ends_and_a_purge_says_so(g: Graph) -> None:
    g.deletions.set_window(0.0)
    uid = g.obj_add("user", {"email": "a@b"})
    g.obj_delete(uid, cascade=True)
    assert g.deletions.wait(30)
    with pytest.raises(InvalidRequest, match="past its restore window"):
        g.obj_restore(uid)
    purged = g.deletions.purge()
    assert [d.root for d in purged] == [uid]
    assert purged[0].status == "purged"
    assert g.deletions.of_object(uid).objects == {"user": 1}  # the report stays
    assert g.deletions.purge() == []
    with pytest.raises(InvalidRequest, match="purged"):
        g.obj_restore(uid)


def test_the_cleaner_purges_what_is_past_its_window_and_says_so(
    g: Graph, caplog: pytest.LogCaptureFixture
) -> None:
    kept, gone = g.obj_add("user"), g.obj_add("user")
    post = g.obj_add("post")
    g.assoc_add(gone, "authored", post)
    g.obj_delete(kept, cascade=True)  # within its 14 days
    g.deletions.set_window(0.0)
    g.obj_delete(gone, cascade=True)  # past its window once done
    assert g.deletions.wait(30)
    caplog.set_level(logging.INFO, logger="assocdb.deletions")
    g.start_cleaner(interval=0.01)

    # The count is raised after the status swap and before the log line, in the
    # cleaner's thread: wait for it (a stored state), not for a captured record.
    wait_until(lambda: g.deletions.purged == 1, patience=120)
    assert g.deletions.of_object(gone).status == "purged"
    assert g.deletions.of_object(kept).status == "done"
    wait_until(lambda: any("purged" in r.message for r in caplog.records), patience=30)
    said = [r for r in caplog.records if r.name == "assocdb.deletions" and "purged" in r.message]
    assert len(said) == 1
    assert said[0].levelno == logging.INFO
    assert said[0].exc_info is None
    assert f"deletion 2 of object {gone}" in said[0].message
    assert "post=1" in said[0].message
    assert "user=1" in said[0].message
    assert "authored=1" in said[0].message
    g.obj_restore(kept)  # the other one is untouched
    assert g.obj_get(kept) is not None


def test_a_purge_that_fails_before_it_is_done_is_counted_and_logged_when_it_is(
    g: Graph, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report is made before the status swap: a failing schema read (a server
    under load) leaves the deletion to the next purge, which says so, rather than
    marking it purged without a count or a log line."""
    g.deletions.set_window(0.0)
    uid = g.obj_add("user")
    g.obj_delete(uid, cascade=True)
    assert g.deletions.wait(30)
    real = g.engine.reload_schema

    def unavailable() -> object:
        raise assocdb.Unavailable("the schema read timed out")

    monkeypatch.setattr(g.engine, "reload_schema", unavailable)
    with pytest.raises(assocdb.Unavailable):
        g.deletions.purge()
    monkeypatch.setattr(g.engine, "reload_schema", real)
    assert g.deletions.of_object(uid).status == "done"
    caplog.set_level(logging.INFO, logger="assocdb.deletions")
    assert [d.root for d in g.deletions.purge()] == [uid]
    assert g.deletions.purged == 1
    assert [r.message for r in caplog.records if "purged deletion" in r.message]


def _home_held(g: Graph, user: int) -> list[tuple[int, int]]:
    """(item, author) of the live entries stored in `user`'s home list."""
    backend = g.engine.backend
    blob = backend.timelines(shard_of(user, backend.shards), [user]).get(user, b"")
    return sorted((e[1], e[2]) for e in unpack(blob) if e[2] > 0 and not is_deleted(e))


def test_a_cascade_clears_the_users_own_home_timeline_and_restore_brings_it_back(
    g: Graph,
) -> None:
    g.define_timeline("follows", mode="write")
    ada, bob, cat = g.obj_add("user"), g.obj_add("user"), g.obj_add("user")
    g.assoc_add(ada, "follows", bob)
    g.assoc_add(ada, "follows", cat)
    g.post(bob, 1001, time=10)
    g.post(bob, 1002, time=20)
    g.post(cat, 1003, time=30)
    assert g.drain(30)
    assert _home_held(g, ada) == [(1001, bob), (1002, bob), (1003, cat)]
    assert len(g.home_timeline(ada).items) == 3  # (cached, if the graph caches)

    g.obj_delete(ada, cascade=True)
    assert g.deletions.wait(30)
    assert _home_held(g, ada) == []  # not just hidden by the removed follows: gone
    assert g.deletions.of_object(ada).home == 3
    g.post_delete(bob, 1002)  # deleted while ada is: stays deleted after the restore
    assert g.drain(30)

    g.obj_restore(ada)
    assert g.drain(30)
    assert _home_held(g, ada) == [(1001, bob), (1003, cat)]
    assert [i.item for i in g.home_timeline(ada).items] == [1003, 1001]


def test_a_delivery_landing_after_the_clear_is_cleared_too_and_restored(g: Graph) -> None:
    """A post's fan-out that read its followers before the cascade removed the
    follows edge delivers after the home was cleared: the batch's end clears it."""
    g.define_timeline("follows", mode="write")
    ada, bob = g.obj_add("user"), g.obj_add("user")
    g.assoc_add(ada, "follows", bob)
    g.post(bob, 1001, time=10)
    assert g.drain(30)
    g.deletions.pause()  # the tombstone and the clear now, the walk later
    g.obj_delete(ada, cascade=True)
    assert _home_held(g, ada) == []
    g.post(bob, 1002, time=20)  # ada still follows bob: delivered after the clear
    assert g.drain(30)
    assert _home_held(g, ada) == [(1002, bob)]
    g.deletions.resume()
    assert g.deletions.wait(30)
    assert _home_held(g, ada) == []
    assert g.deletions.of_object(ada).home == 2

    g.obj_restore(ada)
    assert g.drain(30)
    assert _home_held(g, ada) == [(1001, bob), (1002, bob)]


def test_dangling_edges_and_orphans_are_found_and_repaired(g: Graph) -> None:
    ada, bob = g.obj_add("user"), g.obj_add("user")
    post, lonely = g.obj_add("post"), g.obj_add("post")
    g.assoc_add(ada, "authored", post)
    g.assoc_add(bob, "likes", post)  # no inverse: a cascade of the post cannot find it
    g.assoc_add(ada, "follows", bob)
    g.obj_delete(post)  # a plain delete: its edges stay
    report = g.deletions.dangling()
    assert {(e.id1, e.atype, e.id2, e.reason) for e in report.edges} == {
        (ada, "authored", post, "deleted"),
        (bob, "likes", post, "deleted"),
        (post, "author", ada, "deleted"),
    }
    assert [(o.id, o.otype) for o in report.orphans] == [(lonely, "post")]
    assert g.deletions.dangling(repair=True).repaired
    assert g.deletions.dangling() == assocdb.DanglingReport([], [], False)
    assert g.obj_get(lonely) is None
    assert g.assoc_count(ada, "authored") == 0
    assert g.assoc_count(ada, "follows") == 1  # nothing else


def test_deleting_again_is_the_same_deletion(g: Graph) -> None:
    """A client retrying a lost answer must not record a second, empty deletion that
    a restore would then undo instead of the real one."""
    ada, post = g.obj_add("user", {"n": 1}), g.obj_add("post")
    g.assoc_add(ada, "authored", post)
    g.obj_delete(ada, cascade=True)
    g.obj_delete(ada, cascade=True)
    assert g.deletions.wait(30)
    bob = g.obj_add("user")
    g.assoc_add(bob, "follows", ada)  # written to the deleted object after its cascade
    assert g.obj_delete(ada, cascade=True).status == "queued"  # walks again
    assert g.deletions.wait(30)
    assert g.assoc_count(bob, "follows") == 0
    assert len(g.deletions.all()) == 1
    assert g.deletions.of_object(ada).edges == {"authored": 1, "followed_by": 1}
    g.obj_restore(ada)
    assert g.obj_get(post) is not None
    assert g.assoc_count(bob, "follows") == 1


def test_a_cascade_into_many_deep_posts_skips_empty_lists_with_exact_counts(g: Graph) -> None:
    """A user owning 600 posts (2 pages of `authored`), each liked by another user:
    every post and both legs of every edge go, counts exact, and the lists a post does
    not have are walked within the step that finds the next non-empty one (the job's
    `fresh` chunks); posts go a batch at a time, so the record is a few chunks per
    batch, not per post."""
    g.define_assoc("likes_post", inverse="liked_by", on_delete="shallow")
    g.define_assoc("liked_by", inverse="likes_post", on_delete="shallow")
    ada, bob = g.obj_add("user", {"n": "ada"}), g.obj_add("user", {"n": "bob"})
    posts = 600
    first = 10**6
    for start in range(0, posts, 300):
        with g.batch() as batch:
            for p in range(start, start + 300):
                batch.obj_add("post", {"n": p}, id=first + p)
    g.bulk_load(((ada, "authored", first + p, p + 1) for p in range(posts)), workers=1)
    g.bulk_load(((bob, "likes_post", first + p, p + 1) for p in range(posts)), workers=1)
    g.obj_delete(ada, cascade=True)
    assert g.deletions.wait(600)
    report = g.deletions.of_object(ada)
    assert report.status == "done"
    assert report.objects == {"user": 1, "post": posts}
    assert report.edges == {"authored": posts, "liked_by": posts}
    assert g.assoc_count(ada, "authored") == 0
    assert g.assoc_count(bob, "likes_post") == 0
    assert g.obj_get(first) is None
    assert g.obj_get(first + posts - 1) is None
    assert g.check_counts() == []
    assert g.check_inverses() == []
    job = g.deletions._job(report.id)
    # ada: her object, 2 pages of posts; each batch of 100 posts: their objects (with the
    # closing pass over the batch before), their likes
    assert job.chunks == 1 + 2 + 2 * (posts // BATCH_OBJECTS)
    assert len(msgspec.json.encode(job)) < 1000  # no list of every object reached
    g.obj_restore(ada)
    assert g.assoc_count(ada, "authored") == posts
    assert g.assoc_count(bob, "likes_post") == posts
    assert g.obj_get(first + 7) is not None


def test_a_cascades_removals_give_way_to_client_writes(
    g: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """They go through the pipeline's low lane (`writes.lanes`): a client's write never
    waits for a whole step of the cascade, only for a slice of it at most."""
    ada = g.obj_add("user", {"n": "ada"})
    with g.batch() as b:
        for f in range(30):
            b.assoc_add(10_000 + f, "follows", ada)
    lanes: list[bool] = []
    submit = g.engine.submit_many

    def spied(writes, sync=None, low=False):  # type: ignore[no-untyped-def]
        lanes.append(low)
        return submit(writes, sync, low)

    monkeypatch.setattr(g.engine, "submit_many", spied)
    g.obj_delete(ada, cascade=True)
    assert g.deletions.wait(30)
    assert lanes
    assert all(lanes)
    assert g.assoc_count(ada, "followed_by") == 0
    assert g.deletions.of_object(ada).edges == {"followed_by": 30}


def test_a_restore_puts_every_follow_back_before_it_posts_again(
    open_graph: OpenGraph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A re-post's fan-out reads the author's followers when it runs: each follow the
    deletion removed is back before any item is posted again, whatever step of the
    deletion's record holds it (here each edge is a step of its own, the posts type is
    walked, so recorded, before the follows, and each fan-out runs at once)."""
    from assocdb.api import cascade_walk

    monkeypatch.setattr(cascade_walk, "STEP_EDGES", 1)
    g = open_graph()
    g.define_assoc("posted", on_delete="shallow")  # defined first: walked first
    g.define_assoc("follows", inverse="followed_by", on_delete="shallow")
    g.define_assoc("followed_by", inverse="follows", on_delete="shallow")
    g.define_object("user")
    g.define_timeline("follows", mode="write")
    bob = g.obj_add("user")
    fans = [g.obj_add("user") for _ in range(4)]
    for fan in fans:
        g.assoc_add(fan, "follows", bob)
    for item in (1001, 1002, 1003):
        g.post(bob, item, time=item)
    assert g.drain(30)
    g.obj_delete(bob, cascade=True)
    assert g.deletions.wait(30)
    assert all(_home_held(g, fan) == [] for fan in fans)

    timelines = g.deletions._timelines
    post = timelines.post

    def post_and_deliver(*args: object, **kwargs: object) -> object:
        done = post(*args, **kwargs)
        assert g.drain(30)  # the fan-out now, not after the restore's later steps
        return done

    monkeypatch.setattr(timelines, "post", post_and_deliver)
    g.obj_restore(bob)
    assert g.drain(30)
    delivered = [(1001, bob), (1002, bob), (1003, bob)]
    assert [_home_held(g, fan) for fan in fans] == [delivered] * len(fans)


def test_a_restore_whose_rows_are_queued_posts_nothing_and_can_be_run_again(
    open_graph: OpenGraph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restore whose rows the store answers `queued` (journaled, not yet applied: a
    busy or failing shard) posts no item again, since a re-post's fan-out would miss
    the followers not yet back; it says so, the deletion stays restorable, and
    restoring it again once the queue drains gives everything back."""
    g = open_graph()
    g.define_assoc("follows", inverse="followed_by", on_delete="shallow")
    g.define_assoc("followed_by", inverse="follows", on_delete="shallow")
    g.define_object("user")
    g.define_timeline("follows", mode="write")
    bob = g.obj_add("user")
    fan = g.obj_add("user")
    g.assoc_add(fan, "follows", bob)
    g.post(bob, 1001, time=1001)
    assert g.drain(30)
    g.obj_delete(bob, cascade=True)
    assert g.deletions.wait(30)
    engine = g.engine
    submit_many = engine.submit_many
    # The rows are journaled as any write; only the answer is `queued`.
    monkeypatch.setattr(
        engine, "submit_many", lambda writes, sync=None, low=False: submit_many(writes, False, low)
    )
    with pytest.raises(assocdb.Unavailable, match="restore it again"):
        g.obj_restore(bob)
    assert g.drain(30)
    assert _home_held(g, fan) == []  # nothing posted again
    monkeypatch.setattr(engine, "submit_many", submit_many)
    assert g.obj_restore(bob).status == "restored"
    assert g.drain(30)
    assert g.assoc_count(bob, "followed_by") == 1
    assert _home_held(g, fan) == [(1001, bob)]
