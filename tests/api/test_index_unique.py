"""Unique indexes under batching: writes that enter the pipeline together, or while
the writes before them are still being applied, are judged as if applied in order."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from assocdb import Conflict, Graph
from assocdb.core.ids import shard_of
from tests.api.test_indexes import live_entries, rebuilt
from tests.conftest import OpenGraph
from tests.support.helpers import wait_until


def ids_on(graph: Graph, shards: list[int], start: int = 1) -> list[int]:
    """One free explicit id on each of `shards`, in that order."""
    found: list[int] = []
    candidate = start
    for shard in shards:
        while shard_of(candidate, graph.shards) != shard:
            candidate += 1
        found.append(candidate)
        candidate += 1
    return found


def outcome(deferred: Any) -> Any:
    """The result of a batch's call, or the Conflict it raised."""
    try:
        return deferred.result()
    except Conflict as exc:
        return exc


def holders(graph: Graph, name: str, value: str) -> list[int]:
    """The live objects the index finds under `value`; the index must agree with them."""
    assert live_entries(graph, name) == rebuilt(graph, name)
    return [o.id for o in graph.index_query(name, [value]).items]


@pytest.mark.parametrize("shard_on", ["email", None])
@pytest.mark.parametrize("same_shard", [True, False], ids=["one shard", "two shards"])
@pytest.mark.parametrize("allocated", [True, False], ids=["allocated ids", "given ids"])
def test_two_adds_of_one_unique_key_in_a_batch_let_the_first_through(
    graph: Graph, shard_on: str | None, same_shard: bool, allocated: bool
) -> None:
    graph.define_index("email", "user", ["email"], unique=True, shard_on=shard_on)
    a, b = ids_on(graph, [0, 0 if same_shard else 1])
    with graph.batch() as batch:
        if allocated:  # a new id: the write is concrete rows from the start
            first = batch.obj_add("user", {"email": "a@x"}, near=a)
            second = batch.obj_add("user", {"email": "a@x"}, near=b)
        else:  # a given id: resolved against the stored row
            first = batch.obj_add("user", {"email": "a@x"}, id=a)
            second = batch.obj_add("user", {"email": "a@x"}, id=b)
    winner = first.result()
    with pytest.raises(Conflict, match="unique"):
        second.result()
    assert holders(graph, "email", "a@x") == [winner]
    if not allocated:
        assert graph.obj_get(b) is None
    graph.obj_delete(winner)
    graph.obj_add("user", {"email": "a@x"}, id=b)  # free again, for the loser too


@pytest.mark.parametrize("shard_on", ["email", None])
def test_an_update_in_a_batch_cannot_take_a_key_an_add_before_it_took(
    graph: Graph, shard_on: str | None
) -> None:
    graph.define_index("email", "user", ["email"], unique=True, shard_on=shard_on)
    a, b = ids_on(graph, [0, 1])
    graph.obj_add("user", {"email": "b@x"}, id=b)
    with graph.batch() as batch:
        add = batch.obj_add("user", {"email": "a@x"}, id=a)
        update = batch.obj_update(b, {"email": "a@x"})
    assert add.result() == a
    with pytest.raises(Conflict, match="unique"):
        update.result()
    assert graph.obj_get(b).data == {"email": "b@x"}  # type: ignore[union-attr]
    assert holders(graph, "email", "a@x") == [a]
    assert holders(graph, "email", "b@x") == [b]


@pytest.mark.parametrize("shard_on", ["email", None])
def test_a_batch_that_frees_a_key_and_takes_it_is_judged_like_its_writes_in_order(
    graph: Graph, shard_on: str | None
) -> None:
    graph.define_index("email", "user", ["email"], unique=True, shard_on=shard_on)
    x, y, z, w = ids_on(graph, [0, 1, 2, 3])
    graph.obj_add("user", {"email": "a@x"}, id=x)
    with graph.batch() as batch:  # in order, both are allowed: x moves, then y takes a@x
        moved = batch.obj_update(x, {"email": "b@x"})
        took = batch.obj_add("user", {"email": "a@x"}, id=y)
    assert (moved.result().status, took.result()) == ("applied", y)
    assert (holders(graph, "email", "a@x"), holders(graph, "email", "b@x")) == ([y], [x])
    with graph.batch() as batch:  # in order, z finds b@x still held by x
        early = batch.obj_add("user", {"email": "b@x"}, id=z)
        moved = batch.obj_update(x, {"email": "c@x"})
    assert isinstance(outcome(early), Conflict)
    assert moved.result().status == "applied"
    assert graph.obj_get(z) is None
    with graph.batch() as batch:  # a deletion frees the key for the write after it
        gone = batch.obj_delete(x)
        took = batch.obj_add("user", {"email": "c@x"}, id=w)
        late = batch.obj_add("user", {"email": "c@x"}, id=z)
    assert (gone.result().status, took.result()) == ("applied", w)
    assert isinstance(outcome(late), Conflict)
    assert holders(graph, "email", "c@x") == [w]
    assert holders(graph, "email", "b@x") == []


def hold_begins(graph: Graph) -> tuple[dict[int, threading.Event], list[int]]:
    """Shard transactions that wait, on a shard put in the returned dict, for its
    event; the list records the shards held, in order."""
    holds: dict[int, threading.Event] = {}
    held: list[int] = []
    backend: Any = graph.engine.backend
    begin = backend.dialect.begin

    def hold(shard: int, sql: str) -> None:
        if sql == begin and shard in holds:
            held.append(shard)
            holds.pop(shard).wait()

    backend.faults.append(hold)
    return holds, held


def run(call: Callable[[], Any], results: dict[str, Any], name: str) -> threading.Thread:
    def target() -> None:
        try:
            results[name] = call()
        except Conflict as exc:
            results[name] = exc

    thread = threading.Thread(target=target)
    thread.start()
    return thread


@pytest.mark.parametrize("shard_on", ["email", None])
def test_two_threads_adding_one_unique_key_in_one_batch_let_one_through(
    graph: Graph, shard_on: str | None
) -> None:
    graph.define_index("email", "user", ["email"], unique=True, shard_on=shard_on)
    busy, a, b = ids_on(graph, [2, 0, 1])
    holds, held = hold_begins(graph)
    release = holds[2] = threading.Event()
    results: dict[str, Any] = {}
    threads = [run(lambda: graph.obj_add("post", {}, id=busy), results, "busy")]
    wait_until(lambda: held == [2])  # a lone write is being applied…
    threads.append(run(lambda: graph.obj_add("user", {"email": "a@x"}, id=a), results, "a"))
    threads.append(run(lambda: graph.obj_add("user", {"email": "a@x"}, id=b), results, "b"))
    pipeline = graph.engine.pipeline
    wait_until(lambda: len(pipeline._inbox) == 2)  # …while both wait to enter, together
    release.set()
    for thread in threads:
        thread.join()
    assert graph.engine.pipeline.batches == 2
    won = [name for name in "ab" if not isinstance(results[name], Conflict)]
    assert len(won) == 1
    assert holders(graph, "email", "a@x") == [results[won[0]]]


@pytest.mark.parametrize("shard_on", ["email", None])
def test_a_unique_key_a_write_being_applied_takes_is_taken(
    graph: Graph, shard_on: str | None
) -> None:
    """A write of a key that a write being applied takes waits for it, and is then
    refused: the key is taken, though it was not in the stored index when it came."""
    graph.define_index("email", "user", ["email"], unique=True, shard_on=shard_on)
    busy, a, b = ids_on(graph, [2, 0, 1])
    holds, held = hold_begins(graph)
    first = holds[2] = threading.Event()
    results: dict[str, Any] = {}
    threads = [run(lambda: graph.obj_add("post", {}, id=busy), results, "busy")]
    wait_until(lambda: held == [2])  # a lone write is applied by its own thread…
    second = holds[0] = threading.Event()
    threads.append(run(lambda: graph.obj_add("user", {"email": "a@x"}, id=a), results, "a"))
    pipeline = graph.engine.pipeline
    wait_until(lambda: len(pipeline._inbox) == 1)
    first.set()
    wait_until(lambda: held == [2, 0])  # …so a's goes through the pipeline, held applying
    threads.append(run(lambda: graph.obj_add("user", {"email": "a@x"}, id=b), results, "b"))
    wait_until(lambda: "b" in results or len(pipeline._inbox) == 1)
    second.set()
    for thread in threads:
        thread.join()
    assert results["a"] == a
    assert isinstance(results["b"], Conflict)
    assert holders(graph, "email", "a@x") == [a]
    assert graph.obj_get(b) is None


def test_a_refused_add_on_an_unsynced_graph_fails_alone(open_graph: OpenGraph) -> None:
    """With sync=False a write is answered once journaled; an add refused before it
    is journaled answers with its error, and the writes batched with it go on."""
    graph = open_graph(sync=False)
    graph.define_object("user")
    graph.define_index("email", "user", ["email"], unique=True)
    with graph.batch() as batch:
        first = batch.obj_add("user", {"email": "a@x"})
        second = batch.obj_add("user", {"email": "a@x"})
        other = batch.obj_add("user", {"email": "b@x"})
    with pytest.raises(Conflict, match="unique"):
        second.result()
    assert graph.drain(timeout=60)
    assert holders(graph, "email", "a@x") == [first.result()]
    assert holders(graph, "email", "b@x") == [other.result()]


def test_an_unsynced_add_of_a_key_a_queued_delete_frees_goes_through(
    open_graph: OpenGraph,
) -> None:
    """sync=False: add an object, delete it, add another with its key, one call after
    the other, before the background has applied the first: judged as if applied in
    order (as on a synced graph), the second add takes the key."""
    graph, first, add_another = _held_unsynced_holder(open_graph)
    assert graph.obj_delete(first).status == "queued"  # its row pending: unresolved
    second = add_another()
    assert graph.drain(timeout=60)
    assert holders(graph, "email", "a@x") == [second]


def test_an_unsynced_add_of_a_key_a_queued_write_keeps_is_a_bad_job(
    open_graph: OpenGraph,
) -> None:
    """The same, when the holder's queued write (a patch) does not free the key: the
    add, acknowledged, is refused when applied (a bad job), as any unsynced write."""
    graph, first, add_another = _held_unsynced_holder(open_graph)
    assert graph.obj_update(first, {"name": "ada"}).status == "queued"  # unresolved
    second = add_another()
    wait_until(lambda: graph.engine.journal.counts()["bad"] == 1)
    assert graph.obj_get(second) is None
    assert holders(graph, "email", "a@x") == [first]
    assert len(graph.engine.applier.pending.claims) == 0


def _held_unsynced_holder(open_graph: OpenGraph) -> tuple[Graph, int, Callable[[], int]]:
    """A sync=False graph with a unique email index; the id of an object whose add of
    a@x the background is applying, held; and `add_another`: add a@x to a new object
    on another shard, then let the held add go on (the new object's id)."""
    graph = open_graph(sync=False)
    graph.define_object("user")
    graph.define_index("email", "user", ["email"], unique=True)
    first, near = ids_on(graph, [0, 1])
    holds, held = hold_begins(graph)
    release = holds[0] = threading.Event()
    assert graph.obj_add("user", {"email": "a@x"}, id=first) == first
    wait_until(lambda: held == [0])  # the background applies it: held

    def add_another() -> int:
        try:
            return graph.obj_add("user", {"email": "a@x"}, near=near)
        finally:
            release.set()

    return graph, first, add_another
