"""The server's guards: tokens files that would leave it open, what an unknown
route tells a stranger, long calls within the deadline, ports, and cleanup."""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import re
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

import assocdb
from assocdb import Client, InvalidRequest
from assocdb.cli.main import main
from assocdb.serve.auth import Tokens
from tests.support.helpers import wait_until
from tests.support.http_server import ADMIN, READER, Server, free_port


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    directory = tmp_path_factory.mktemp("guarded") / "graph"
    with assocdb.open(directory, shards=2) as g:
        g.define_assoc("follows", inverse="followed_by")
        g.bulk_load((1, "follows", n, n) for n in range(2, 402))  # 1 follows 400
        g.define_object("user")
        g.define_index("user_by_name", "user", ["name"])
        g.define_index("user_by_name_too", "user", ["name"])
        for n in range(50):
            g.obj_add("user", {"name": f"u{n}"})
    running = Server(directory, True, "--deadline", "2")
    yield running
    running.stop()


# -- tokens files ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        (b"", "defines no token"),
        (
            b'[[tokens]]\nname = "web"\nsecret = "0123456789abcdefgh"\nscopes = ["read"]\n',
            "[[token]]",
        ),
        (b"[[token]\n", "not valid TOML"),
        (b'[[token]]\nname = "web"\nsecret = "short"\nscopes = ["read"]\n', "at least 16"),
        (b'[[token]]\nname = "web"\nsecret = "0123456789abcdefgh"\nscopes = ["rule"]\n', "scopes"),
        (b"[[token]]\nname = '\xff'\n", "not UTF-8"),
    ],
)
def test_a_tokens_file_that_yields_no_usable_token_is_refused(
    tmp_path: Path, text: bytes, complaint: str
) -> None:
    path = tmp_path / "tokens.toml"
    path.write_bytes(text)
    with pytest.raises(InvalidRequest, match=complaint.replace("[", r"\[")):
        Tokens.load(path)
    result = CliRunner().invoke(main, ["serve", str(tmp_path / "g"), "--tokens-file", str(path)])
    assert result.exit_code == 1
    assert result.output.startswith("Error: ")
    assert result.output.count("\n") == 1
    assert not (tmp_path / "g").exists()


def test_a_missing_tokens_file_named_in_the_environment_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="cannot read the tokens file"):
        Tokens.load(None, {"ASSOCDB_TOKENS_FILE": str(tmp_path / "nowhere.toml")})


# -- what a stranger learns ---------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/no_such_method", "/v2/assoc_count", "/admin/secret"])
def test_an_unknown_route_answers_401_before_404(server: Server, path: str) -> None:
    stranger = httpx.post(server.url + path, json={})
    assert stranger.status_code == 401
    assert stranger.json()["error"]["code"] == "unauthenticated"
    known = httpx.post(server.url + path, json={}, headers={"authorization": f"Bearer {READER}"})
    assert known.status_code == 404


# -- long calls answer within the deadline -------------------------------------------------


def test_a_throttled_build_slice_answers_within_the_deadline(server: Server) -> None:
    headers = {"authorization": f"Bearer {ADMIN}"}
    body = {"name": "user_by_name", "rate": 1e-9}
    answer = httpx.post(f"{server.url}/v1/index_build", json=body, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["state"] == "building"
    assert answer.elapsed.total_seconds() < 2.0  # the server's deadline


def test_the_client_builds_in_slices_within_its_timeout(server: Server) -> None:
    with Client(server.url, token=ADMIN, timeout=1.0, retries=0) as client:
        assert client.index_build("user_by_name_too", rate=1e-9).state == "building"
        assert client.drain() is True


@pytest.mark.parametrize("timeout", [-1, float("inf"), 1e300])
def test_drain_rejects_a_timeout_out_of_range(server: Server, timeout: float) -> None:
    headers = {"authorization": f"Bearer {ADMIN}"}
    answer = httpx.post(
        f"{server.url}/v1/drain",
        content=f'{{"timeout": {timeout!r}}}'.replace("inf", "1e999"),
        headers=headers,
    )
    assert answer.status_code == 400


# -- ports and cleanup ----------------------------------------------------------------------


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_serve_rejects_a_port_out_of_range(tmp_path: Path, port: str) -> None:
    result = CliRunner().invoke(main, ["serve", str(tmp_path / "g"), "--port", port])
    assert result.exit_code == 2
    assert "--port" in result.output


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--deadline", "nan"),
        ("--deadline", "-1"),
        ("--header-timeout", "nan"),
        ("--header-timeout", "inf"),
        ("--max-body", "0"),
        ("--max-batch", "0"),
    ],
)
def test_serve_rejects_limits_that_would_refuse_every_request(
    tmp_path: Path, server: Server, option: str, value: str
) -> None:
    busy = str(server.port)  # were the option taken, the command would stop there, not serve
    result = CliRunner().invoke(main, ["serve", str(tmp_path / "g"), "--port", busy, option, value])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith(f"Error: Invalid value for '{option}'")


@pytest.mark.parametrize(
    ("option", "value"), [("--redis", "localhost:6379"), ("--cache-max-age", "nan")]
)
def test_serve_with_a_bad_cache_setting_says_so_in_one_line_before_serving(
    tmp_path: Path, server: Server, option: str, value: str
) -> None:
    # A worker made the cache: redis-py's ValueError came as a traceback after "serving …".
    busy = str(server.port)  # were the setting taken, the command would stop there, not serve
    result = CliRunner().invoke(main, ["serve", str(tmp_path / "g"), "--port", busy, option, value])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {option} must be"), result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "g").exists()


def test_serve_on_a_busy_port_says_so_in_one_line(tmp_path: Path, server: Server) -> None:
    result = CliRunner().invoke(main, ["serve", str(tmp_path / "g"), "--port", str(server.port)])
    assert result.exit_code == 1
    assert result.output == (
        f"Error: cannot listen on 127.0.0.1:{server.port}: Address already in use\n"
    )


def test_serve_with_workers_removes_its_metrics_directory(tmp_path: Path) -> None:
    pattern = f"{tempfile.gettempdir()}/assocdb-metrics-*"
    before = set(glob.glob(pattern))
    directory = tmp_path / "graph"
    assocdb.open(directory, shards=2).close()
    running = Server(directory, False, "--workers", "2")
    assert set(glob.glob(pattern)) - before  # it made one
    running.process.send_signal(signal.SIGTERM)
    assert running.process.wait(timeout=60) == 0
    running.stop()
    assert set(glob.glob(pattern)) - before == set()


def test_free_port_helper_gives_a_port() -> None:
    assert 0 < free_port() < 65536


# -- bad bodies ------------------------------------------------------------------------------


def nested_query(depth: int) -> bytes:
    query = b'{"type":"term","node":1,"atype":"follows"}'
    for _ in range(depth):
        query = b'{"type":"union","parts":[' + query + b"]}"
    return b'{"query":' + query + b"}"


@pytest.mark.parametrize(
    ("method", "body"),
    [
        ("obj_add", b'{"otype":"user","data":{"a":' + b"[" * 1500 + b"]" * 1500 + b"}}"),
        ("obj_add", b'{"otype":"user","data":{"a":' + b"[" * 200 + b"]" * 200 + b"}}"),
        ("query_page", nested_query(3000)),
        ("query_page", nested_query(100)),
        ("obj_add", b'{"otype":"user","data":{"a":"\xff\xfe"}}'),
        ("batch", b'{"requests":[{"method":"query_count","args":' + nested_query(3000) + b"}]}"),
    ],
)
def test_deep_or_undecodable_bodies_are_400(server: Server, method: str, body: bytes) -> None:
    answer = httpx.post(
        f"{server.url}/v1/{method}", content=body, headers={"authorization": f"Bearer {ADMIN}"}
    )
    if method == "batch":
        assert answer.status_code in (200, 400)
        if answer.status_code == 200:
            assert answer.json()["results"][0]["error"]["code"] == "invalid_request"
        return
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_request"


@pytest.mark.parametrize("method", ["assoc_add", "batch"])
@pytest.mark.parametrize("media", ["application/x-www-form-urlencoded", "text/plain"])
def test_a_body_declared_as_a_form_or_text_is_400_and_writes_nothing(
    server: Server, method: str, media: str
) -> None:
    # `curl -d` sends a form; a web page may post text/plain to loopback without asking.
    add = {"id1": 9001, "atype": "follows", "id2": 9002}
    body = add if method == "assoc_add" else {"requests": [{"method": "assoc_add", "args": add}]}
    headers = {"authorization": f"Bearer {ADMIN}", "content-type": media}
    answer = httpx.post(f"{server.url}/v1/{method}", json=body, headers=headers)
    assert answer.status_code == 400, answer.text
    assert "Content-Type: application/json" in answer.json()["error"]["message"]
    headers = {"authorization": f"Bearer {READER}"}
    count = {"id1": 9001, "atype": "follows"}
    assert httpx.post(f"{server.url}/v1/assoc_count", json=count, headers=headers).json() == {
        "result": 0
    }


@pytest.mark.parametrize(
    ("method", "body", "key"),
    [
        ("obj_add", b'{"otype":"user","data":{"name":"dup1","name":"dup2"}}', "name"),
        ("assoc_add", b'{"id1":9101,"atype":"follows","id2":9102,"id2":9103}', "id2"),
        (
            "batch",
            b'{"requests":[{"method":"assoc_add","args":{"id1":9101,"atype":"follows",'
            b'"id2":9104,"data":{"w":1,"w":2}}}]}',
            "w",
        ),
    ],
)
def test_a_write_naming_a_key_twice_is_400_and_writes_nothing(
    server: Server, method: str, body: bytes, key: str
) -> None:
    # msgspec keeps the last of two values silently: the store would keep what
    # the client may not have meant.
    headers = {"authorization": f"Bearer {ADMIN}", "content-type": "application/json"}
    answer = httpx.post(f"{server.url}/v1/{method}", content=body, headers=headers)
    assert answer.status_code == 400, answer.text
    assert f"names the key {key!r} twice" in answer.json()["error"]["message"]
    client = Client(server.url, token=ADMIN)
    try:
        assert client.assoc_count(9101, "follows") == 0
        assert client.index_query("user_by_name", ["dup1"]).items == []
        assert client.index_query("user_by_name", ["dup2"]).items == []
    finally:
        client.close()


# -- work and size bounds ------------------------------------------------------------------


def test_a_batch_whose_answer_is_too_big_is_413(server: Server) -> None:
    reads = [{"method": "assoc_range", "args": {"id1": 1, "atype": "follows", "limit": 400}}]
    headers = {"authorization": f"Bearer {READER}"}
    small = httpx.post(f"{server.url}/v1/batch", json={"requests": reads * 100}, headers=headers)
    assert small.status_code == 200
    big = httpx.post(f"{server.url}/v1/batch", json={"requests": reads * 200}, headers=headers)
    assert big.status_code == 413
    assert "more than 50,000 rows" in big.json()["error"]["message"]


def test_a_query_of_too_many_terms_is_400(server: Server) -> None:
    term = {"type": "term", "node": 1, "atype": "follows"}
    query = {"type": "union", "parts": [term] * 300}
    headers = {"authorization": f"Bearer {READER}"}
    answer = httpx.post(f"{server.url}/v1/query_count", json={"query": query}, headers=headers)
    assert answer.status_code == 400
    assert "at most 256 terms" in answer.json()["error"]["message"]


def test_the_smallest_time_is_refused(server: Server) -> None:
    headers = {"authorization": f"Bearer {ADMIN}"}
    body = {"id1": 5, "atype": "follows", "id2": 6, "time": -(2**63)}
    answer = httpx.post(f"{server.url}/v1/assoc_add", json=body, headers=headers)
    assert answer.status_code == 400
    assert "-2^63+1" in answer.json()["error"]["message"]
    body["time"] = -(2**63) + 1
    assert httpx.post(f"{server.url}/v1/assoc_add", json=body, headers=headers).status_code == 200


def send_partial_body(server: Server) -> socket.socket:
    """A request whose body stops short of its Content-Length."""
    conn = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    conn.sendall(
        b"POST /v1/assoc_count HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {READER}\r\n".encode()
        + b"Content-Length: 100\r\n\r\n"
        + b'{"id1": 1,'
    )
    return conn


def read_answer(conn: socket.socket) -> bytes:
    """One whole HTTP answer: its head and the Content-Length bytes of body after it."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = conn.recv(4096)
        assert chunk, f"the server closed the connection after {answer!r}"
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    declared = re.search(rb"content-length: (\d+)", head, re.IGNORECASE)
    assert declared is not None, head
    length = int(declared.group(1))
    while len(body) < length and (more := conn.recv(4096)):
        body += more
    return head + b"\r\n\r\n" + body


def test_a_stalled_body_does_not_hold_the_server(server: Server) -> None:
    conn = send_partial_body(server)
    answer = read_answer(conn)  # the server answers once the deadline (2 s) passed
    conn.close()
    assert answer.startswith(b"HTTP/1.1 503")
    assert b"did not arrive within" in answer


def test_a_client_leaving_mid_body_is_not_an_error(tmp_path: Path) -> None:
    directory = tmp_path / "graph"
    assocdb.open(directory, shards=2).close()
    running = Server(directory, True)
    send_partial_body(running).close()
    headers = {"authorization": f"Bearer {READER}"}
    body = {"id1": 1, "atype": "x"}
    assert httpx.post(f"{running.url}/v1/assoc_count", json=body, headers=headers).status_code
    running.process.send_signal(signal.SIGTERM)
    running.process.wait(timeout=60)
    assert running.process.stderr is not None
    log = running.process.stderr.read().decode()
    running.stop()
    assert "Traceback" not in log


def test_a_batch_stops_at_its_deadline(tmp_path: Path) -> None:
    """A batch that outlives its deadline answers Timeout and runs no further read:
    the worker thread, abandoned by the request, used to run the rest of it anyway
    (up to `max_batch` reads each), outside the thread limiter's count."""
    import asyncio

    from assocdb.serve.server import Limits, create_app

    graph = assocdb.open(tmp_path / "graph", shards=2)
    graph.define_assoc("follows")
    release, calls = _hold_counts(graph)  # each read held until the request timed out
    app = create_app(graph, limits=Limits(deadline=0.2))
    server = app.state.server
    finished = threading.Event()
    run_batch = server._run_batch
    untils: list[float] = []
    handed: list[float] = []  # when the request handed the batch to a worker thread
    in_thread = server._in_thread

    async def handing(*args: object) -> bytes:
        handed.append(time.monotonic())
        return await in_thread(*args)  # type: ignore[no-any-return, arg-type]

    server._in_thread = handing

    def watched(*args: object) -> bytes:
        untils.append(args[2])  # type: ignore[arg-type]
        try:
            return run_batch(*args)  # type: ignore[no-any-return]
        finally:
            finished.set()

    server._run_batch = watched
    item = {"method": "assoc_count", "args": {"id1": 1, "atype": "follows"}}

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            return await http.post("/v1/batch", json={"requests": [item] * 50})

    try:
        answer = asyncio.run(post())
        assert answer.status_code == 503
        assert answer.json()["error"]["code"] == "timeout"
        release.set()
        assert finished.wait(60)
        # The batch's own deadline is the request's, from its arrival: no later than
        # the worker's (which the 503 keeps), however late the worker thread started
        # (from the thread's start, on a loaded machine, the batch ran on after the 503).
        assert untils[0] <= handed[0] + 0.2
        # The first read was held past the deadline, or (on a loaded machine) the
        # thread started after it and ran none: either way, none after it.
        assert len(calls) <= 1
    finally:
        release.set()
        graph.close()


def test_an_open_server_answers_only_requests_for_a_loopback_host(tmp_path: Path) -> None:
    """DNS rebinding: a page of http://evil.example:PORT whose name now resolves to
    127.0.0.1 is, for the browser, of the server's own origin (its Origin header
    matches the Host), so the server's own checks let it write and use the console."""
    directory = tmp_path / "graph"
    with assocdb.open(directory, shards=2) as g:
        g.define_assoc("follows")
    running = Server(directory, False)  # no tokens: loopback only
    try:
        add = {"id1": 1, "atype": "follows", "id2": 2}
        evil = {"host": f"evil.example:{running.port}"}
        origin = {**evil, "origin": f"http://evil.example:{running.port}"}
        answer = httpx.post(f"{running.url}/v1/assoc_add", json=add, headers=origin)
        assert answer.status_code == 403
        assert "evil.example" in answer.json()["error"]["message"]
        assert httpx.get(f"{running.url}/admin/queue", headers=evil).status_code == 403
        count = {"id1": 1, "atype": "follows"}
        for host in ("127.0.0.1", "localhost", "[::1]", "app.localhost"):
            headers = {"host": f"{host}:{running.port}"}
            answer = httpx.post(f"{running.url}/v1/assoc_count", json=count, headers=headers)
            assert answer.json() == {"result": 0}, host
        assert httpx.get(f"{running.url}/admin/queue").status_code == 200
    finally:
        running.stop()


def test_calls_still_running_past_their_deadline_are_bounded(tmp_path: Path) -> None:
    """A call past its deadline answers Timeout, but its thread runs on (Python cannot
    stop it) and no longer counts in anyio's thread limiter: slow calls, one after
    the other, each left one more thread running, without bound. Past `max_overdue`
    of them, a call is refused (Unavailable) until they end."""
    import asyncio

    from assocdb.serve.server import Limits, create_app

    graph = assocdb.open(tmp_path / "graph", shards=2)
    graph.define_assoc("follows")
    release, calls = _hold_counts(graph)  # each read held until the request timed out
    app = create_app(graph, limits=Limits(max_overdue=4))
    body = {"id1": 1, "atype": "follows"}

    async def post(n: int) -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            return [await http.post("/v1/assoc_count", json=body) for _ in range(n)]

    try:
        _set_deadline(app, 0.05)  # the held calls' deadline: each of them times out
        codes = [a.json()["error"]["code"] for a in asyncio.run(post(10))]
        assert codes == ["timeout"] * 4 + ["unavailable"] * 6
        assert len(calls) == 4
        release.set()
        wait_until(lambda: app.state.server.overdue.count == 0)
        _set_deadline(app, 60.0)  # on a loaded machine a free read may well take 50 ms
        assert [a.json() for a in asyncio.run(post(1))] == [{"result": 0}]
    finally:
        release.set()
        graph.close()


# -- readiness ------------------------------------------------------------------------


def _set_deadline(app: Any, seconds: float) -> None:
    """Give `app`'s requests from now on `seconds` to finish. A test that needs calls to
    run past their deadline sets a short one only for those calls: the rest of it must
    not race a 50 ms clock on a loaded machine (a first probe of the shards took longer)."""
    server = app.state.server
    server.limits = dataclasses.replace(server.limits, deadline=seconds)


def _get(app: object, path: str) -> httpx.Response:
    import asyncio

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            return await http.get(path)

    return asyncio.run(get())


def test_readyz_is_503_while_calls_past_their_deadline_fill_the_server(tmp_path: Path) -> None:
    """Past `max_overdue` calls running late, every call to a thread is refused: a load
    balancer must stop sending traffic there (/readyz said ready all along)."""
    import asyncio

    from assocdb.serve.server import Limits, create_app

    graph = assocdb.open(tmp_path / "graph", shards=2)
    graph.define_assoc("follows")
    release = threading.Event()
    count = graph.assoc_count

    def held(*args: object, **kwargs: object) -> int:
        release.wait(60)
        return count(*args, **kwargs)  # type: ignore[arg-type]

    graph.assoc_count = held  # type: ignore[method-assign]
    app = create_app(graph, limits=Limits(max_overdue=2))

    async def post(n: int) -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            for _ in range(n):
                await http.post("/v1/assoc_count", json={"id1": 1, "atype": "follows"})

    try:
        assert _get(app, "/readyz").json() == {"status": "ready"}
        _set_deadline(app, 0.05)  # the held calls' deadline: each of them times out
        asyncio.run(post(2))
        answer = _get(app, "/readyz")
        assert answer.status_code == 503
        assert "past their deadline" in answer.json()["overdue"]
        release.set()
        wait_until(lambda: app.state.server.overdue.count == 0)
        _set_deadline(app, 60.0)  # /readyz's own probe of the shards gets the deadline too
        assert _get(app, "/readyz").json() == {"status": "ready"}
    finally:
        release.set()
        graph.close()


def test_readyz_is_503_while_the_journal_cannot_be_written(tmp_path: Path) -> None:
    """A full disk (here: a journal connection that refuses every write) refuses every
    write: /readyz says so until a write can be journaled again."""
    from assocdb import Unavailable
    from assocdb.serve.server import create_app

    graph = assocdb.open(tmp_path / "graph", shards=2)
    graph.define_assoc("follows")
    app = create_app(graph)
    journal = graph.engine.journal
    try:
        journal._conn.execute("PRAGMA query_only = 1")  # every write fails, as on a full disk
        with pytest.raises(Unavailable):
            graph.assoc_add(1, "follows", 2)
        answer = _get(app, "/readyz")
        assert answer.status_code == 503
        assert "journal" in answer.json()["journal"]
        journal._conn.execute("PRAGMA query_only = 0")  # space again
        assert _get(app, "/readyz").json() == {"status": "ready"}
        assert graph.assoc_add(1, "follows", 2).status == "applied"
    finally:
        journal._conn.execute("PRAGMA query_only = 0")
        graph.close()


@pytest.mark.parametrize(
    "sent", [b"", b"POS", b"POST /v1/assoc_count HTTP/1.1\r\nHost: 127.0.0.1\r\n"]
)
def test_a_request_head_that_never_completes_closes_its_connection(
    tmp_path: Path, sent: bytes
) -> None:
    """A connection that sends nothing, or half a request head, held a descriptor until
    the client left (uvicorn times out only connections idle after an answer): enough
    of them and the process can accept no one."""
    directory = tmp_path / "graph"
    with assocdb.open(directory, shards=1) as g:
        g.define_assoc("follows")
    running = Server(directory, False, "--header-timeout", "0.5")
    try:
        with socket.create_connection(("127.0.0.1", running.port), timeout=30) as raw:
            raw.sendall(sent)
            with contextlib.suppress(ConnectionResetError):  # (the timeout: a hang fails)
                assert raw.recv(1) == b""
        with httpx.Client(base_url=running.url) as http:  # a whole request is answered
            answer = http.post("/v1/assoc_count", json={"id1": 1, "atype": "follows"})
            assert answer.json() == {"result": 0}
    finally:
        running.stop()


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--idle-timeout", "nan"),
        ("--idle-timeout", "inf"),
        ("--idle-timeout", "-1"),
        ("--frame-timeout", "nan"),
        ("--frame-timeout", "0"),
        ("--max-connections", "0"),
    ],
)
def test_serve_thrift_rejects_a_timeout_that_is_not_a_number_of_seconds(
    tmp_path: Path, option: str, value: str
) -> None:
    """NaN passes every range check: it was taken, and every connection's socket
    timeout failed once the server ran."""
    result = CliRunner().invoke(main, ["serve-thrift", str(tmp_path / "g"), option, value])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith(f"Error: Invalid value for '{option}'")
    assert not (tmp_path / "g").exists()  # refused before the graph was opened


def _hold_counts(graph: assocdb.Graph) -> tuple[threading.Event, list[tuple[object, ...]]]:
    """Make each `assoc_count` of `graph` wait for the returned event (60 s at most);
    the list records the calls."""
    release, calls = threading.Event(), []
    count = graph.assoc_count

    def held(*args: object, **kwargs: object) -> int:
        calls.append(args)
        release.wait(60)
        return count(*args, **kwargs)  # type: ignore[arg-type]

    graph.assoc_count = held  # type: ignore[method-assign]
    return release, calls


def test_a_request_on_a_connection_past_the_limit_is_503(tmp_path: Path) -> None:
    """`--max-connections 2`: two open connections are served, a request on a third is
    answered 503; once one of the two closes, a new connection is served again."""
    directory = tmp_path / "graph"
    with assocdb.open(directory, shards=1) as g:
        g.define_assoc("follows")
    # (A request's body has the deadline to arrive: an hour, for the held ones.)
    running = Server(directory, False, "--max-connections", "2", "--deadline", "3600")
    count = {"id1": 1, "atype": "follows"}
    try:
        # Each holds its connection with a request in flight, its body not yet sent:
        # counted however long the test takes (an idle keep-alive connection is
        # closed by the server after 5 s, and a third would then be served).
        first, second = _request_in_flight(running.port), _request_in_flight(running.port)
        with httpx.Client(base_url=running.url, timeout=60) as third:
            assert third.post("/v1/assoc_count", json=count).status_code == 503
        first.close()

        def served() -> bool:
            with httpx.Client(base_url=running.url, timeout=60) as fresh:
                return fresh.post("/v1/assoc_count", json=count).status_code == 200

        wait_until(served)  # (the server learns of the close when it reads it)
        second.sendall(_IN_FLIGHT_BODY)
        head, _, body = read_answer(second).partition(b"\r\n\r\n")
        assert (head.split()[1], body) == (b"200", b'{"result":0}')
        second.close()
    finally:
        running.stop()


_IN_FLIGHT_BODY = b'{"id1": 1, "atype": "follows"}'


def _request_in_flight(port: int) -> socket.socket:
    """A connection whose `assoc_count` the server is reading the body of (it answered
    `100 Continue`), the body not sent: `_IN_FLIGHT_BODY` completes it."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=60)
    conn.sendall(
        b"POST /v1/assoc_count HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
        b"Content-Length: %d\r\n\r\n" % len(_IN_FLIGHT_BODY)
    )
    head = _read_head(conn)
    assert head.startswith(b"HTTP/1.1 100 "), head
    return conn


def _read_head(conn: socket.socket) -> bytes:
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = conn.recv(1)
        assert byte, f"the server closed the connection after {head!r}"
        head += byte
    return head
