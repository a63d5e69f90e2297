"""The HTTP server and the Client, against a real `assocdb serve` process."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

import assocdb
from assocdb import Client, Graph
from assocdb.client.wire import METHODS
from tests.support.http_server import ADMIN, READER, WRITER, Server


def make_graph(directory: Path) -> None:
    with assocdb.open(directory, shards=4) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.define_assoc("friend", symmetric=True)
        g.define_assoc("likes", limit=100)
        g.define_assoc("blocks")
        g.define_object("user")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    directory = tmp_path_factory.mktemp("served") / "graph"
    make_graph(directory)
    running = Server(directory)
    yield running
    running.stop()


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    with Client(server.url, token=ADMIN) as c:
        yield c


def raw(
    server: Server, method: str, body: object = None, token: str | None = ADMIN, **kw: object
) -> httpx.Response:
    headers = {} if token is None else {"authorization": f"Bearer {token}"}
    if isinstance(body, bytes):
        return httpx.post(f"{server.url}/v1/{method}", content=body, headers=headers, **kw)  # type: ignore[arg-type]
    return httpx.post(f"{server.url}/v1/{method}", json=body or {}, headers=headers, **kw)  # type: ignore[arg-type]


# -- the one interface ----------------------------------------------------------------


def test_client_and_graph_share_one_interface() -> None:
    def public(cls: type) -> set[str]:
        return {n for n in dir(cls) if not n.startswith("_")}

    # local to a process: tracing its SQL, its shard count, its cleaner thread, and a
    # scan of every replica of the shard map it opened (an operator's tool)
    local = {"trace", "shards", "start_cleaner", "verify_replicas"}
    assert public(Graph) - public(Client) == local
    assert public(Client) == public(Graph) - local
    # batch(): both run reads and writes, each returning a Deferred
    for name in public(Graph) & public(Client) - {"batch"}:
        ours, theirs = getattr(Graph, name), getattr(Client, name)
        if callable(ours):
            assert inspect.signature(ours) == inspect.signature(theirs), name


def test_every_method_through_the_client(client: Client) -> None:
    called: set[str] = set()
    original = client._call

    def spy(name: str, args: object) -> object:
        called.add(name)
        return original(name, args)  # type: ignore[arg-type]

    client._call = spy  # type: ignore[method-assign]
    g = client
    assert {t.name for t in g.schema.assoc_types} >= {"follows", "followed_by", "likes"}
    g.define_assoc("mentions")
    g.define_object("post")
    uid = g.obj_add("user", {"name": "ada"})
    assert g.obj_get(uid).data == {"name": "ada"}  # type: ignore[union-attr]
    assert g.obj_update(uid, {"bio": "x"}).status == "applied"
    assert g.obj_delete(uid).status == "applied"
    assert g.obj_get(uid) is None
    assert g.assoc_add(100, "follows", 200, time=5, data={"k": 1}).status == "applied"
    g.assoc_add(100, "follows", 300, time=6)
    g.assoc_add(100, "likes", 300, time=6)
    assert [a.id2 for a in g.assoc_get(100, "follows", [200, 300, 9])] == [300, 200]
    assert g.assoc_count(100, "follows") == 2
    assert g.assoc_contains(100, "follows", 200)
    assert g.assoc_edge(100, "follows", 200).data == {"k": 1}  # type: ignore[union-attr]
    assert [a.id2 for a in g.assoc_range(100, "follows")] == [300, 200]
    assert [a.id2 for a in g.assoc_time_range(100, "follows", 5, 5)] == [200]
    page = g.assoc_page(100, "follows", limit=1)
    assert page.items[0].id2 == 300
    assert [a.id2 for a in g.assoc_page(100, "follows", page.next_cursor, limit=1).items] == [200]
    assert [p.items[0].id2 for p in g.assoc_pages(100, "follows", limit=1)] == [300, 200]
    assert [a.id2 for a in g.assoc_iter(100, "follows", limit=1)] == [300, 200]
    g.assoc_archive(100, "follows", 300)
    assert g.assoc_count(100, "follows", "archived") == 1
    g.assoc_negate(100, "follows", 300)
    g.assoc_change_type(100, "likes", 300, "blocks")
    g.assoc_delete(100, "follows", 300)
    q = g.select(100, "follows") | g.select(100, "blocks")
    assert q.page().items == [300, 200]
    assert q.count() == assocdb.Count(2, exact=True)
    many = g.select([100, 7], "follows") | g.select(g.select(100, "blocks"), "likes")
    assert many.page().items == [200]  # (many-list terms travel as ListsSpec)
    assert g.select(g.select(100, "follows"), "followed_by").count().value == 1
    assert g.node_archive(100, "follows").status == "queued"
    assert g.drain(timeout=10)
    assert g.node_state(100, "follows") == "archived"
    g.node_negate(100, "blocks")
    g.node_remove(100, "blocks")
    g.node_unarchive(100, "follows")
    assert g.drain(timeout=10)
    assert g.bulk_load([(500, "likes", n, n) for n in range(1, 11)]) == 10
    assert g.assoc_count(500, "likes") == 10
    assert g.queue_stats().bad == 0
    assert g.queue_jobs("bad") == []
    assert g.queue_job(10**12) is None
    assert g.queue_retry() == 0
    assert g.queue_reinject() == 0
    assert g.check_counts() == []
    assert g.check_inverses() == []
    assert g.cache_stats() is not None
    assert all(k.per_second > 0 for k in g.hot_keys(5))
    assert g.define_timeline("follows").mode == "write"
    assert g.timeline_config() == assocdb.TimelineConfig()
    g.assoc_add(700, "follows", 800)
    assert g.post(800, 900, time=1).status == "applied"
    assert g.drain(timeout=10)
    assert g.home_timeline(700).items == [assocdb.TimelineItem(900, 800, 1)]
    assert g.home_timeline(700, mode="read").items == g.user_timeline(800).items
    g.post_delete(800, 900)
    assert g.drain(timeout=10)
    assert g.home_timeline(700, limit=5).items == []
    g.obj_add("user", {"email": "a@x"})
    assert g.define_index("by_email", "user", ["email"]).state == "building"
    assert g.index_build("by_email", seconds=5).state == "ready"
    assert [i.name for i in g.indexes()] == ["by_email"]
    assert g.index_status("by_email").total == 2
    assert [o.data for o in g.index_query("by_email", ["a@x"]).items] == [{"email": "a@x"}]
    assert g.index_check("by_email").missing == 0
    assert g.index_repair_recent("by_email").missing == 0
    g.drop_index("by_email")
    g.enable_feed()
    g.assoc_add(1, "likes", 2)
    feed = g.changes(kinds=["edge"], wait=1.0)
    assert [(c.type, c.id1, c.id2) for c in feed.items] == [("likes", 1, 2)]
    g.feed_commit("mailer", feed.next_cursor)
    assert g.changes(group="mailer").items == []
    g.define_assoc("wrote", inverse="written_by", on_delete="deep")
    g.define_object("note", owned=True)
    writer, note = g.obj_add("user"), g.obj_add("note")
    g.assoc_add(writer, "wrote", note)
    assert g.obj_delete(writer, cascade=True).status == "queued"
    assert g.deletions.wait(10)
    assert g.obj_get(note) is None
    assert g.deletions.of_object(writer).objects == {"user": 1, "note": 1}
    assert g.obj_restore(writer).status == "restored"
    assert g.obj_get(note) is not None
    assert [d.root for d in g.deletions.all()] == [writer]
    assert g.deletions.purge() == []
    assert g.deletions.dangling().orphans == []
    assert called == set(METHODS)


def test_the_client_schema_is_the_graph_schema(server: Server, client: Client) -> None:
    client.define_index("schema_by_name", "user", ["name"], unique=True)
    try:
        ours = client.schema
        with assocdb.open(server.directory, create=False) as g:  # another process, the same graph
            theirs = g.schema
        assert ours.assoc_types == theirs.assoc_types
        assert ours.object_types == theirs.object_types
        assert ours.indexes == theirs.indexes
        assert "schema_by_name" in [i.name for i in ours.indexes]
    finally:
        client.drop_index("schema_by_name")


def test_the_same_errors_as_the_library(client: Client) -> None:
    with pytest.raises(assocdb.UnknownType, match="did you mean 'follows'"):
        client.assoc_add(1, "folows", 2)
    with pytest.raises(assocdb.InvalidRequest, match="id1 must be between 1"):
        client.assoc_add(0, "follows", 2)
    with pytest.raises(assocdb.NotFound):
        client.assoc_change_type(1, "follows", 999_999, "blocks")
    with pytest.raises(assocdb.DataTooLarge):
        client.assoc_add(1, "follows", 2, data="x" * 70_000)
    with pytest.raises(assocdb.InvalidCursor):
        client.assoc_page(1, "follows", "garbage")
    client.obj_add("user", {"a": 1}, id=424242)
    with pytest.raises(assocdb.Conflict):
        client.obj_add("user", {"a": 2}, id=424242)


def test_batches_answer_each_read(client: Client) -> None:
    client.assoc_add(7, "follows", 8, time=1)
    with client.batch() as b:
        count = b.assoc_count(7, "follows")
        page = b.assoc_page(7, "follows")
        missing = b.assoc_count(7, "nope")
        edge = b.assoc_edge(7, "follows", 8)
    assert count.result() == 1
    assert [a.id2 for a in page.result().items] == [8]
    assert edge.result() is not None
    with pytest.raises(assocdb.UnknownType):
        missing.result()
    with pytest.raises(AttributeError, match="not one"):
        client.batch().node_archive  # noqa: B018 - whole-node writes are not batched


def test_a_batch_writes_through_the_pipeline_and_reads_see_earlier_writes(
    client: Client,
) -> None:
    with client.batch() as b:
        before = b.assoc_count(70, "follows")
        added = [b.assoc_add(70, "follows", n, time=n) for n in range(1, 51)]
        new_user = b.obj_add("user", {"name": "ada"})
        after = b.assoc_count(70, "follows")
        inverse = b.assoc_count(7, "followed_by")
        b.assoc_delete(70, "follows", 1)
        page = b.assoc_range(70, "follows", limit=3)
        unknown = b.assoc_add(70, "nope", 2)  # refused alone: the rest is written
        missing = b.assoc_change_type(70, "follows", 999, "likes")
    assert before.result() == 0
    assert {a.result().status for a in added} == {"applied"}
    assert after.result() == 50
    assert inverse.result() == 1
    assert [a.id2 for a in page.result()] == [50, 49, 48]
    assert client.obj_get(new_user.result()).data == {"name": "ada"}  # type: ignore[union-attr]
    with pytest.raises(assocdb.UnknownType):
        unknown.result()
    with pytest.raises(assocdb.NotFound):
        missing.result()
    assert client.assoc_count(70, "follows") == 49
    assert client.assoc_count(70, "follows", "removed") == 1
    assert client.assoc_count(25, "followed_by") == 1


def test_a_named_load_through_the_client_resumes_after_its_stored_parts(
    server: Server, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    import assocdb.client.client as client_module

    monkeypatch.setattr(client_module, "_BULK_CHUNK", 3)  # parts of 3 edges
    edges = [(80, "likes", n, n) for n in range(1, 11)]

    def stopping() -> Iterator[tuple[int, str, int, int]]:
        yield from edges[:7]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        client.bulk_load(stopping(), name="over http")
    assert client.assoc_count(80, "likes") == 6  # two parts sent
    # Again, with other times for the stored part: those edges are skipped.
    again = [(a, t, b, time + 100 if time <= 6 else time) for a, t, b, time in edges]
    assert client.bulk_load(again, name="over http") == 10
    assert [e.time for e in client.assoc_range(80, "likes", limit=20)] == list(range(10, 0, -1))
    assert client.bulk_load(again, name="over http") == 10  # finished: a new load
    assert client.assoc_edge(80, "likes", 1).time == 101  # type: ignore[union-attr]


def test_a_load_of_edges_with_data_goes_in_parts_within_the_body_limit(server: Server) -> None:
    """100 edges of 60 KiB data: one part of 6 MB was over the server's 4 MiB body
    limit (DataTooLarge), though every edge is within its own limit."""
    edges = [(81, "likes", n, n, {"text": "x" * (60 << 10)}) for n in range(1, 101)]
    with Client(server.url, token=ADMIN, timeout=30) as client:
        assert client.bulk_load(edges) == 100
        assert client.assoc_count(81, "likes") == 100


def test_a_batch_with_writes_needs_the_write_scope(server: Server, client: Client) -> None:
    writes = {
        "requests": [{"method": "assoc_add", "args": {"id1": 71, "atype": "likes", "id2": 1}}]
    }
    response = raw(server, "batch", writes, token=READER)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert client.assoc_count(71, "likes") == 0  # nothing written
    reads = {"requests": [{"method": "assoc_count", "args": {"id1": 71, "atype": "likes"}}]}
    assert raw(server, "batch", reads, token=READER).status_code == 200
    assert raw(server, "batch", writes, token=WRITER).json()["results"][0]["result"]["status"] == (
        "applied"
    )
    # An item the batch can't decode is that item's error; the others are written.
    mixed = {
        "requests": [
            {"method": "assoc_add", "args": {"id1": 72, "atype": "likes", "id2": "x"}},
            {"method": "assoc_add", "args": {"id1": 72, "atype": "likes", "id2": 3}},
            {"method": "node_archive", "args": {"id1": 72, "atype": "likes"}},
            {
                "method": "query_count",
                "args": {"query": {"type": "select", "id1": 72, "atype": "likes"}},
            },
        ]
    }
    results = raw(server, "batch", mixed, token=WRITER).json()["results"]
    assert [r.get("error", {}).get("code") for r in results] == [
        "invalid_request",
        None,
        "invalid_request",
        "invalid_request",
    ]
    assert "batch with writes" in results[3]["error"]["message"]
    assert client.assoc_count(72, "likes") == 1


# -- auth, limits, the error shape -----------------------------------------------------


def test_tokens_and_scopes(server: Server, client: Client) -> None:
    before = client.assoc_count(1, "likes")
    args = {"id1": 1, "atype": "likes", "id2": 2}
    for token, status, code in [
        (None, 401, "unauthenticated"),
        ("wrong-token-0123456789", 401, "unauthenticated"),
        (READER, 403, "permission_denied"),
    ]:
        response = raw(server, "assoc_add", args, token=token)
        assert response.status_code == status
        assert response.json()["error"]["code"] == code
    assert raw(server, "queue_stats", token=WRITER).status_code == 403
    assert raw(server, "assoc_count", {"id1": 1, "atype": "likes"}, token=READER).status_code == 200
    assert client.assoc_count(1, "likes") == before  # nothing changed
    with Client(server.url, token=READER) as reader, pytest.raises(assocdb.PermissionDenied):
        reader.assoc_add(1, "likes", 2)
    with Client(server.url) as anonymous, pytest.raises(assocdb.Unauthenticated):
        anonymous.assoc_count(1, "likes")


@pytest.mark.parametrize(
    ("method", "body", "status", "code"),
    [
        ("assoc_add", b"{not json", 400, "invalid_request"),
        ("assoc_add", b"[1, 2]", 400, "invalid_request"),
        ("assoc_add", {"id1": "1", "atype": "follows", "id2": 2}, 400, "invalid_request"),
        ("assoc_add", {"id1": 1.5, "atype": "follows", "id2": 2}, 400, "invalid_request"),
        ("assoc_add", {"id1": 1, "atype": "follows"}, 400, "invalid_request"),
        ("assoc_add", {"id1": 1, "atype": "follows", "id2": 2, "extra": 1}, 400, "invalid_request"),
        ("assoc_add", {"id1": 2**64, "atype": "follows", "id2": 2}, 400, "invalid_request"),
        (
            "assoc_add",
            b'{"id1": 1, "atype": "follows", "id2": 2, "data": NaN}',
            400,
            "invalid_request",
        ),
        ("assoc_range", {"id1": 1, "atype": "follows", "limit": 0}, 400, "invalid_request"),
        ("assoc_page", {"id1": 1, "atype": "follows", "cursor": "zz"}, 400, "invalid_cursor"),
        ("obj_add", {"otype": "user", "data": {"x": "y" * (5 << 20)}}, 413, "data_too_large"),
        ("no_such_method", {}, 404, "not_found"),
        ("query_page", {"query": {"type": "intersect", "parts": []}}, 400, "invalid_request"),
    ],
)
def test_bad_requests_get_a_4xx_in_the_one_error_shape(
    server: Server, method: str, body: object, status: int, code: str
) -> None:
    response = raw(server, method, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (float("nan"), "data is nan"),
        ({"a": [float("inf")]}, "is inf"),
        ({1, 2}, "is a set"),
        (b"xy", "is a bytes"),
        ({1: 2}, "has a key 1"),
        ("\ud800", "lone surrogate"),
    ],
)
def test_the_client_refuses_data_json_would_change_as_graph_does(
    client: Client, data: object, message: str
) -> None:
    # They went out as null, a list, base64 text, the key "1" (or a UnicodeEncodeError).
    with pytest.raises(assocdb.InvalidRequest, match=message):
        client.assoc_add(5000, "likes", 5001, data=data)
    batch = client.batch()
    batch.assoc_add(5000, "likes", 5002)

    def add_and_send() -> None:  # refused when queued, or (a surrogate) when sent
        batch.assoc_add(5000, "likes", 5003, data=data)
        batch.run()

    with pytest.raises(assocdb.InvalidRequest, match=message):
        add_and_send()
    assert client.assoc_count(5000, "likes") == 0


def test_a_huge_limit_is_clamped(server: Server) -> None:
    response = raw(server, "assoc_range", {"id1": 1, "atype": "follows", "limit": 10**9})
    assert response.status_code == 200


def test_wrong_http_methods_and_paths(server: Server) -> None:
    token = {"authorization": f"Bearer {READER}"}  # without one: 401 (test_server_guards)
    response = httpx.get(f"{server.url}/v1/assoc_add", headers=token)
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert httpx.get(f"{server.url}/nowhere", headers=token).json()["error"]["code"] == "not_found"


def test_wrong_turns_say_the_right_way(server: Server) -> None:
    token = {"authorization": f"Bearer {READER}"}
    message = httpx.get(f"{server.url}/v1/assoc_count", headers=token).json()["error"]["message"]
    assert message.startswith("GET /v1/assoc_count: use POST, not GET")
    assert "application/json" in message
    healthz = httpx.post(f"{server.url}/healthz", headers=token)
    assert "use GET, not POST" in healthz.json()["error"]["message"]
    # what `curl -d '{...}'` sends: a form
    form = {**token, "content-type": "application/x-www-form-urlencoded"}
    body = b'{"id1": 1, "atype": "friend"}'
    response = httpx.post(f"{server.url}/v1/assoc_count", content=body, headers=form)
    assert response.status_code == 400
    assert "send Content-Type: application/json" in response.json()["error"]["message"]


def test_the_root_points_to_the_docs_and_the_console(server: Server) -> None:
    text = httpx.get(server.url)
    assert text.status_code == 200
    assert "/docs" in text.text
    assert "/admin" in text.text
    assert text.text.count("\n") == 1
    page = httpx.get(server.url, headers={"accept": "text/html"})
    assert 'href="/docs"' in page.text
    assert 'href="/admin"' in page.text


def test_docs_show_defaults_as_json(server: Server) -> None:
    page = httpx.get(f"{server.url}/docs").text
    assert "None" not in page
    assert "&#x27;out&#x27;" not in page
    assert "direction = &quot;out&quot;" in page
    assert "= null" in page
    assert "X-Assocdb-Ids: string" in page  # what a JavaScript client needs to know


def test_batch_limits(server: Server) -> None:
    reads = [{"method": "assoc_count", "args": {"id1": 1, "atype": "follows"}}] * 201
    response = raw(server, "batch", {"requests": reads})
    assert response.status_code == 400
    assert "at most 200" in response.json()["error"]["message"]


# -- operations -------------------------------------------------------------------------


def test_health_readiness_metrics_and_docs(server: Server, client: Client) -> None:
    client.assoc_count(1, "follows")
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{server.url}/readyz").json() == {"status": "ready"}
    assert httpx.get(f"{server.url}/metrics").status_code == 401
    metrics = httpx.get(f"{server.url}/metrics", headers={"authorization": f"Bearer {ADMIN}"}).text
    assert 'assocdb_request_seconds_count{method="assoc_count"}' in metrics
    assert 'assocdb_operation_seconds_bucket{le="0.0001",operation="assoc_count"}' in metrics
    assert "assocdb_queue_depth 0.0" in metrics
    assert "assocdb_statement_seconds" in metrics
    assert "assocdb_cache_hit_ratio" in metrics
    document = httpx.get(f"{server.url}/openapi.json").json()
    assert {f"/v1/{name}" for name in METHODS} <= set(document["paths"])
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert "POST /v1/assoc_add" in httpx.get(f"{server.url}/docs").text


def test_binding_beyond_loopback_needs_tokens(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from assocdb.cli.main import main

    result = CliRunner().invoke(
        main, ["serve", str(tmp_path / "g"), "--host", "0.0.0.0"], env={"ASSOCDB_TOKEN": ""}
    )
    assert result.exit_code == 2
    assert "refusing to listen on 0.0.0.0 without tokens" in result.output


# -- many servers ----------------------------------------------------------------------------


def test_two_servers_one_graph_and_failover(tmp_path: Path) -> None:
    directory = tmp_path / "graph"
    make_graph(directory)
    # Uncached: without Redis, one server's cache would not see the other's writes.
    first, second = (
        Server(directory, True, "--cache-mb", "0"),
        Server(directory, True, "--cache-mb", "0"),
    )
    try:
        with Client(first.url, token=WRITER) as a, Client(second.url, token=WRITER) as b:
            a.assoc_add(1, "follows", 2)
            assert [x.id2 for x in b.assoc_range(2, "followed_by")] == [
                1
            ]  # written via one, read via the other
        failures: list[BaseException] = []
        written: list[int] = []
        with Client([first.url, second.url], token=WRITER, timeout=2.0, retries=3) as both:

            def load() -> None:
                for n in range(3, 403):
                    try:
                        both.assoc_add(1, "follows", n, time=n)
                        written.append(n)
                        both.assoc_count(1, "follows")
                    except BaseException as exc:
                        failures.append(exc)

            worker = threading.Thread(target=load)
            worker.start()
            while len(written) < 100:
                worker.join(0.01)
            first.kill()  # mid-run
            worker.join()
            assert failures == []
            assert both.assoc_count(1, "follows") == 401
            assert {x.id2 for x in both.assoc_get(1, "follows", written)} == set(written)
    finally:
        first.stop()
        second.stop()


def test_timeline_errors_over_http(server: Server, client: Client) -> None:
    client.define_timeline("follows")
    bad = {
        "home_timeline": [{"user": 1, "limit": 0}, {"user": 1, "mode": "sideways"}, {"user": 0}],
        "post": [{"author": 1}, {"author": 1, "item": 2, "time": "soon"}],
        "define_timeline": [{"follows": "likes"}, {"cap": 0}],
    }
    for method, bodies in bad.items():
        for body in bodies:
            answer = raw(server, method, body)
            assert answer.status_code == 400, (method, body, answer.text)
            assert answer.json()["error"]["code"] == "invalid_request"
    cursor = raw(server, "home_timeline", {"user": 1, "cursor": "garbage"})
    assert (cursor.status_code, cursor.json()["error"]["code"]) == (400, "invalid_cursor")
    assert raw(server, "post_delete", {"author": 1, "item": 987_654}).status_code == 404
    assert raw(server, "post", {"author": 1, "item": 2}, token=READER).status_code == 403
    assert raw(server, "define_timeline", {}, token=WRITER).status_code == 403
    assert raw(server, "home_timeline", {"user": 1}, token=READER).status_code == 200


def test_index_and_timeline_bad_input_over_http_leaves_the_store_unchanged(
    server: Server, client: Client
) -> None:
    client.define_object("member")
    client.define_index("member_by_email", "member", ["email"], shard_on="email")
    client.define_index("member_by_age", "member", ["age"], order="recency")
    for n in range(3):
        client.obj_add("member", {"email": f"m{n}@x", "age": 40})
    client.index_build("member_by_email")
    client.index_build("member_by_age")
    client.define_timeline("follows")
    client.assoc_add(9001, "follows", 9002)
    client.post(9002, 10, 1)
    client.post(9002, 11, 2)
    assert client.drain(10)
    before = (client.indexes(), client.index_check("member_by_email"), client.timeline_config())
    page = client.index_query("member_by_age", [40], limit=1)
    home = client.home_timeline(9001, limit=1)
    assert page.next_cursor is not None
    assert home.next_cursor is not None
    q = {"name": "member_by_age"}
    bad: list[tuple[str, object, int, str]] = [
        ("index_query", {"name": "nope"}, 404, "not_found"),
        ("index_query", {**q, "eq": "40"}, 400, "invalid_request"),
        ("index_query", {**q, "eq": [{"a": 1}]}, 400, "invalid_request"),
        ("index_query", {**q, "eq": [2**63]}, 400, "invalid_request"),
        ("index_query", {**q, "eq": ["x" * 2000]}, 400, "invalid_request"),
        ("index_query", {**q, "eq": [40, 1, 2]}, 400, "invalid_request"),
        ("index_query", {**q, "limit": 10**9}, 400, "invalid_request"),
        ("index_query", {**q, "cursor": "garbage"}, 400, "invalid_cursor"),
        ("index_query", {**q, "eq": [41], "cursor": page.next_cursor}, 400, "invalid_cursor"),
        ("index_query", {**q, "cursor": home.next_cursor}, 400, "invalid_cursor"),
        ("index_query", b'{"name": "member_by_age", "eq": [NaN]}', 400, "invalid_request"),
        ("index_query", b"not json", 400, "invalid_request"),
        ("define_index", {"name": "x", "otype": "nope", "properties": ["a"]}, 400, "unknown_type"),
        ("define_index", {"name": "x", "otype": "member", "properties": []}, 400, "schema_error"),
        (
            "define_index",
            {"name": "member_by_age", "otype": "member", "properties": ["b"]},
            400,
            "schema_error",
        ),
        ("drop_index", {"name": "nope"}, 404, "not_found"),
        ("index_build", {"name": "member_by_age", "rate": 0}, 400, "invalid_request"),
        ("index_build", b'{"name": "member_by_age", "seconds": Infinity}', 400, "invalid_request"),
        ("post", {"author": 2**63, "item": 1}, 400, "invalid_request"),
        ("post", {"author": 1, "item": -1}, 400, "invalid_request"),
        ("post", {"author": 1, "item": 1, "updated_at": 2**63 - 1}, 400, "invalid_request"),
        ("user_timeline", {"author": 1, "limit": 10**9}, 400, "invalid_request"),
        ("home_timeline", {"user": 9002, "cursor": home.next_cursor}, 400, "invalid_cursor"),
        ("user_timeline", {"author": 9001, "cursor": home.next_cursor}, 400, "invalid_cursor"),
        ("home_timeline", {"user": 9001, "cursor": page.next_cursor}, 400, "invalid_cursor"),
        ("define_timeline", {"cap": 10**9}, 400, "invalid_request"),
        ("define_timeline", {"posts": "follows"}, 400, "invalid_request"),
    ]
    for method, body, status, code in bad:
        answer = raw(server, method, body)
        assert answer.status_code == status, (method, body, answer.text)
        error = answer.json()["error"]
        assert (error["code"], bool(error["message"])) == (code, True), (method, body)
    after = (client.indexes(), client.index_check("member_by_email"), client.timeline_config())
    assert after == before
    client.drop_index("member_by_email")
    client.drop_index("member_by_age")


def test_a_ttl_is_defined_and_listed_over_http(server: Server, client: Client) -> None:
    kind = client.define_assoc("viewed", inverse="viewed_by", ttl=timedelta(hours=1))
    assert kind.ttl == 3600.0
    assert client.schema.assoc_type("viewed_by").ttl == 3600.0
    with pytest.raises(assocdb.SchemaError, match="ttl must be"):
        client.define_assoc("viewed", inverse="viewed_by", ttl=-5)
    client.assoc_add(1, "viewed", 2, time=1)  # born expired
    client.assoc_add(1, "viewed", 3)
    assert [a.id2 for a in client.assoc_range(1, "viewed")] == [3]
    assert client.assoc_count(1, "viewed") == 1
    assert '"name":"viewed","id":' in raw(server, "schema").text
    assert '"ttl":3600.0' in raw(server, "schema").text
