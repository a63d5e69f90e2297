"""The change feed over HTTP: `POST /v1/changes` (a long poll with `wait`), the client's
calls, 410 for a trimmed cursor, and the Server-Sent Events stream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import assocdb
from assocdb import Client, FeedExpired
from assocdb.core.errors import UnknownType
from assocdb.storage import sqlfeed
from assocdb.storage.sqlite import SQLiteBackend
from tests.support.http_server import ADMIN, READER, Server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    directory = tmp_path_factory.mktemp("feed") / "graph"
    with assocdb.open(directory, shards=2) as g:
        g.define_assoc("likes")
        g.enable_feed()
    running = Server(directory)
    yield running, directory
    running.stop()


def test_the_client_reads_waits_and_commits(served: tuple[Server, Path]) -> None:
    server, _ = served
    with Client(server.url, token=ADMIN) as c:
        start = c.changes().next_cursor
        c.assoc_add(1, "likes", 2)
        page = c.changes(start, wait=5.0)
        assert [(x.type, x.id1, x.id2) for x in page.items] == [("likes", 1, 2)]
        assert c.changes(page.next_cursor, wait=0.2).items == []  # waited, then empty
        c.feed_commit("crawler", page.next_cursor)
        assert c.changes(group="crawler").items == []


def test_the_stream_sends_changes_as_server_sent_events(served: tuple[Server, Path]) -> None:
    server, _ = served
    with Client(server.url, token=ADMIN) as c:
        cursor = c.changes().next_cursor
        c.assoc_add(5, "likes", 6)
    url = f"{server.url}/v1/changes/stream"
    params = {"cursor": cursor, "token": READER}
    with httpx.stream("GET", url, params=params, timeout=30) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        event = [next(lines) for _ in range(3)]
    assert event[0] == "event: change"
    assert event[1].startswith("id: ")
    assert json.loads(event[2].removeprefix("data: "))["id1"] == 5


def test_an_unknown_type_filter_is_400(served: tuple[Server, Path]) -> None:
    server, _ = served
    with Client(server.url, token=ADMIN) as c, pytest.raises(UnknownType, match="'nope'"):
        c.changes(types=["nope"])
    url = f"{server.url}/v1/changes/stream"
    answer = httpx.get(url, params={"type": "nope", "token": READER})
    assert answer.status_code == 400
    assert "'nope'" in answer.text


def test_the_stream_needs_a_token(served: tuple[Server, Path]) -> None:
    server, _ = served
    answer = httpx.get(f"{server.url}/v1/changes/stream")
    assert answer.status_code == 401


# Last: it trims the whole feed, so a cursor from the start fails from then on.
def test_a_trimmed_cursor_is_410(served: tuple[Server, Path]) -> None:
    server, directory = served
    with Client(server.url, token=ADMIN) as c:
        c.assoc_add(3, "likes", 4)
        backend = SQLiteBackend.open(directory, create=False)
        try:
            for shard in range(backend.shards):
                sqlfeed.trim(backend, shard, 0, 0)
        finally:
            backend.close()
        with pytest.raises(FeedExpired):
            c.changes()
    answer = httpx.post(
        f"{server.url}/v1/changes", json={}, headers={"authorization": f"Bearer {ADMIN}"}
    )
    assert answer.status_code == 410
    assert answer.json()["error"]["code"] == "feed_expired"


def test_members_of_a_group_share_the_shards_through_the_client(tmp_path: Path) -> None:
    with assocdb.open(tmp_path / "graph", shards=4) as g:
        g.define_assoc("likes")
        g.enable_feed()
        with g.batch() as batch:
            for n in range(100, 120):
                batch.assoc_add(n, "likes", 1)
    server = Server(tmp_path / "graph")
    try:
        with Client(server.url, token=ADMIN) as c:
            for member in ("a", "b"):  # a read joins: both have before either reads on
                c.changes(group="members", member=member)
            read = {m: c.changes(group="members", member=m, limit=1000) for m in ("a", "b")}
            shards = {m: {x.shard for x in page.items} for m, page in read.items()}
            assert shards["a"].isdisjoint(shards["b"])
            ids = sorted(x.id1 for page in read.values() for x in page.items)
            assert ids == list(range(100, 120))
            for member, page in read.items():
                c.feed_commit("members", page.next_cursor, member=member)
            assert c.changes(group="members").items == []
    finally:
        server.stop()
