"""The HTTP server: a thin, stateless Starlette app over one Graph.

Every route does the same few steps, in one place (`_call`): check the
bearer token's scope, read the body within its size limit, decode it into
the method's argument Struct (msgspec validates types), run the Graph method
in a worker thread within the request deadline, and encode the result. Any
assocdb error becomes `{"error": {...}}` with the status from
`client.wire.STATUS`; an unexpected exception becomes a 500 with a generic
message (and a logged traceback), never a stack trace on the wire.

Several servers (processes, or machines sharing MySQL) can serve one graph:
all state is in the backends and the journal.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Union

import anyio
import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from ..api.batch import READS, WRITES
from ..api.graph import Graph
from ..api.queue_admin import check_drain_timeout
from ..client.wire import (
    BATCH_WRITES,
    BATCHABLE,
    METHODS,
    AssocRange,
    Batch,
    Method,
    SchemaInfo,
    error_body,
    from_spec,
    status_of,
)
from ..core.errors import (
    AssocdbError,
    DataTooLarge,
    InvalidRequest,
    NotFound,
    Timeout,
    Unavailable,
)
from ..core.json import MAX_DEPTH, refuse_duplicate_keys
from ..core.records import Deferred
from . import ids
from .auth import Tokens
from .console.pages import Console
from .metrics import Metrics
from .openapi import ICON, docs_page, openapi
from .peers import Peers
from .stream import changes_stream

log = logging.getLogger("assocdb.server")

JSON = "application/json"
_encode = msgspec.json.encode


@dataclass(frozen=True)
class Limits:
    """What one request may ask for."""

    max_body: int = 4 << 20  # bytes; an object's data may be 1 MiB, JSON-escaped
    max_batch: int = 200  # reads per /v1/batch
    deadline: float = 10.0  # seconds a request may run
    #: Run the reads of INLINE_READS on the event loop instead of a worker
    #: thread. A thread hop costs more than a SQLite read (measured: 8k → 3.5k
    #: requests/s for an empty handler), and SQLite reads in WAL mode never
    #: wait for writers; for a network backend, threads let reads overlap and
    #: this stays off.
    inline_reads: bool = False
    max_batch_rows: int = 50_000  # rows (edges, ids, items) in one batch's answer
    #: Calls still running past their deadline (see `Overdue`) before more are refused.
    max_overdue: int = 16


#: Reads whose cost is one bounded index probe: safe to run on the event loop.
#: Lists walked by position, set queries, timelines and batches can take long,
#: so they run in worker threads, where the loop (and /healthz) stays free and
#: the request deadline holds.
INLINE_READS = frozenset(
    {"assoc_count", "assoc_get", "assoc_contains", "assoc_edge", "assoc_page", "obj_get"}
    | {"assoc_time_range", "node_state", "schema"}
)

#: An `assoc_range` walks `pos + limit` index entries at most: up to this many
#: (the cache's default prefix: mostly a cache hit), it runs on the event loop.
INLINE_RANGE = 1000


def _short_range(body: bytes) -> bool:
    """Whether an assoc_range call's body asks for a short walk (a bad body: run
    where errors are made, either way)."""
    try:
        args = msgspec.json.decode(body or b"{}", type=AssocRange)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return True
    return args.pos + args.limit <= INLINE_RANGE


def create_app(
    graph: Graph,
    tokens: Tokens | None = None,
    limits: Limits | None = None,
    session_key: bytes | None = None,
    sessions_dir: Path | None = None,
    peers: Peers | None = None,
) -> Starlette:
    """The ASGI app serving `graph`, with the operator's console under /admin (its
    session cookies signed with `session_key`, its logged-out sessions kept in
    `sessions_dir`: both one per server, shared by its workers), polling `peers`
    (the workers' cache invalidations) before each request."""
    tokens = tokens or Tokens([])
    metrics = Metrics(graph)
    console = Console(graph, tokens, metrics, session_key, sessions_dir)
    server = Server(graph, tokens, limits or Limits(), metrics, console, peers)
    routes = [
        *server.console.routes(),
        Route("/v1/batch", server.route_batch, methods=["POST"]),
        Route("/v1/changes/stream", changes_stream(graph, tokens), methods=["GET"]),
        Route("/v1/{method}", server.route_method, methods=["POST"]),
        Route("/healthz", server.route_healthz, methods=["GET"]),
        Route("/readyz", server.route_readyz, methods=["GET"]),
        Route("/metrics", server.route_metrics, methods=["GET"]),
        Route("/openapi.json", server.route_openapi, methods=["GET"]),
        Route("/docs", server.route_docs, methods=["GET"]),
        Route("/", server.route_root, methods=["GET"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: server.http_error})
    app.state.server = server
    return app


class Server:
    def __init__(
        self,
        graph: Graph,
        tokens: Tokens,
        limits: Limits,
        metrics: Metrics,
        console: Console,
        peers: Peers | None = None,
    ) -> None:
        self.graph = graph
        self.tokens = tokens
        self.limits = limits
        self.metrics = metrics
        self.peers = peers  # cache invalidations between workers, if any
        self.console = console  # the /admin pages
        self.overdue = Overdue()
        self._calls = {item: (name, self._call_of(name)) for name, item in _BATCH_ITEMS.items()}

    # -- API routes --------------------------------------------------------------------

    async def route_method(self, request: Request) -> Response:
        return await self.method(request, request.path_params["method"])

    async def method(self, request: Request, name: str) -> Response:
        method = METHODS.get(name)
        if method is None:  # only a known token learns which methods exist
            try:
                self.tokens.authenticate(request.headers.get("authorization"))
            except AssocdbError as exc:
                return self._error(name, exc)
            return self._error(name, NotFound(f"no method {name!r}; see /docs"))
        inline: bool | Callable[[bytes], bool] = False
        if self.limits.inline_reads:
            inline = name in INLINE_READS or (name == "assoc_range" and _short_range)
        return await self._call(
            request, name, method.scope, lambda body: self._run_one(method, body), inline
        )

    async def route_batch(self, request: Request) -> Response:
        header = request.headers.get("authorization")  # a batch with writes needs the scope
        # The request's deadline, from its arrival: not from when a worker thread starts
        # the batch (on a loaded machine that can be after the request answered Timeout).
        until = time.monotonic() + self.limits.deadline
        return await self._call(
            request,
            "batch",
            "read",
            lambda body: self._run_batch(body, header, until),
            inline=False,
        )

    async def _call(
        self,
        request: Request,
        name: str,
        scope: str,
        run: Callable[[bytes], bytes],
        inline: bool | Callable[[bytes], bool] = False,
    ) -> Response:
        start = time.perf_counter()
        try:
            self.tokens.authorize(request.headers.get("authorization"), scope)
            if self.peers is not None and self.graph.engine.cache is not None:
                self.peers.poll(self.graph.engine.cache)
            body = await self._body(request)
            strings = ids.wants_strings(request.headers, request.url.query)
            if strings:
                body = ids.parse_ids(body)
            if inline is True or (inline and inline(body)):
                payload = run(body)
            else:
                payload = await self._in_thread(run, body)
        except TimeoutError:
            return self._error(
                name, Timeout(f"{name} did not finish within {self.limits.deadline} s"), start
            )
        except AssocdbError as exc:
            return self._error(name, exc, start)
        except ClientDisconnect:  # a normal event: the client went away mid-request
            log.info("%s: the client disconnected before its request was read", name)
            return Response(status_code=499)
        except Exception:
            log.exception("%s failed unexpectedly", name)
            return self._error(
                name, AssocdbError("internal error; the server log has the details"), start
            )
        self._observe(name, 200, start)
        return Response(ids.format_ids(payload) if strings else payload, media_type=JSON)

    async def _in_thread(self, run: Callable[[bytes], bytes], body: bytes) -> bytes:
        """`run(body)` in a worker thread within the deadline (TimeoutError past it)."""
        overdue, most = self.overdue, self.limits.max_overdue
        if overdue.count >= most:
            raise Unavailable(
                f"this server still runs {overdue.count} calls past their deadline "
                f"(at most {most}); try again later"
            )
        call = _Call(run, overdue)
        try:
            with anyio.fail_after(self.limits.deadline):
                return await anyio.to_thread.run_sync(call, body, abandon_on_cancel=True)
        except TimeoutError:
            call.abandon()
            raise

    async def _body(self, request: Request) -> bytes:
        _check_content_type(request.headers.get("content-type"))
        declared = request.headers.get("content-length")
        limit = self.limits.max_body
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise DataTooLarge(f"the body is {int(declared):,} bytes; the limit is {limit:,}")
        chunks, size = [], 0
        # A slow or stalled client must not hold a worker: the body has the
        # request's deadline to arrive. (asyncio's timeout, not anyio's: a tenth
        # of the cost, and the server runs on asyncio.)
        try:
            async with asyncio.timeout(self.limits.deadline):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise DataTooLarge(f"the body is over the limit of {limit:,} bytes")
                    chunks.append(chunk)
        except TimeoutError:
            raise Timeout(
                f"the request body did not arrive within {self.limits.deadline} s"
            ) from None
        return b"".join(chunks)

    def _run_one(self, method: Method, body: bytes) -> bytes:
        if method.scope != "read":  # what is stored must be what the client meant
            refuse_duplicate_keys(body, "the body")
        args = _decode(body, method.args)
        start = time.perf_counter()
        if method.name in _ENCODED:
            result: Any = msgspec.Raw(self._encoded(method.name, args).json)
        else:
            result = self._dispatch(method.name, args)
        self.metrics.operation_times.add((method.name,), time.perf_counter() - start)
        return _encode(_One(result))

    def _encoded(self, name: str, args: Any) -> _Encoded:
        """A list read's answer, kept encoded with the list's cached answers."""
        return _Encoded(
            *self.graph.services.reads.encoded(name, _encode, *msgspec.structs.astuple(args))
        )

    def _run_batch(self, body: bytes, header: str | None = None, until: float = math.inf) -> bytes:
        """The batch's answer: decoded in one call when every item is well formed (else
        item by item, so that a bad item is that item's error), run without per-read
        metrics, encoded in one call. A batch with writes runs through `Graph.batch()`.

        A batch of reads stops at `until` (time.monotonic()): past the deadline its
        request has answered Timeout and left this thread running, and outside anyio's
        thread limiter, so the rest of its reads would be work for no one."""
        try:
            items = msgspec.json.decode(body or b"{}", type=_TypedBatch).requests  # type: ignore[attr-defined]
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
            return self._run_batch_slowly(body, header, until)
        self._check_batch_size(len(items))
        if any(self._calls[type(item)][0] in BATCH_WRITES for item in items):
            self.tokens.authorize(header, "write")
            refuse_duplicate_keys(body, "the batch")
            return self._run_writes([(self._calls[type(item)][0], item.args) for item in items])
        start = time.perf_counter()
        results: list[Any] = []
        kinds: dict[str, int] = {}
        rows, max_rows = 0, self.limits.max_batch_rows
        calls = self._calls
        for item in items:
            _check_deadline(until)
            name, call = calls[type(item)]
            kinds[name] = kinds.get(name, 0) + 1
            try:
                result = call(item.args)
            except AssocdbError as exc:
                results.append(self._item_error(exc))
                continue
            if type(result) is _Encoded:
                results.append(_One(msgspec.Raw(result.json)))
                rows += result.rows
            else:
                results.append(_One(result))
                rows += _rows(result)
            if rows > max_rows:
                raise _too_many_rows(max_rows)
        self._count_reads(kinds, time.perf_counter() - start, len(items))
        return _encode(_Many(results))

    def _run_batch_slowly(self, body: bytes, header: str | None, until: float) -> bytes:
        batch = _decode(body, Batch)
        self._check_batch_size(len(batch.requests))
        if any(item.method in BATCH_WRITES for item in batch.requests):
            self.tokens.authorize(header, "write")
            refuse_duplicate_keys(body, "the batch")
            return self._run_writes([(item.method, item.args) for item in batch.requests])
        start = time.perf_counter()
        results: list[Any] = []
        kinds: dict[str, int] = {}
        rows = 0
        for item in batch.requests:
            _check_deadline(until)
            try:
                if item.method not in BATCHABLE:
                    raise InvalidRequest(
                        f"a batch runs reads and writes; {item.method!r} is not one"
                    )
                args = _convert(item.method, item.args)
                kinds[item.method] = kinds.get(item.method, 0) + 1
                result = self._dispatch(item.method, args)
            except AssocdbError as exc:
                results.append(self._item_error(exc))
                continue
            results.append(_One(result))
            rows += _rows(result)
            if rows > self.limits.max_batch_rows:
                raise _too_many_rows(self.limits.max_batch_rows)
        self._count_reads(kinds, time.perf_counter() - start, len(batch.requests))
        return _encode(_Many(results))

    def _run_writes(self, items: list[tuple[str, Any]]) -> bytes:
        """A batch with writes, through `Graph.batch()`: its writes go through the write
        pipeline together (one journal fsync, one transaction per touched shard), and a
        read sees the writes before it. Arguments are Structs, or dicts when the batch
        was decoded item by item (then a bad item is that item's error)."""
        start = time.perf_counter()
        answers: list[Deferred[Any] | AssocdbError] = []
        kinds: dict[str, int] = {}
        asdict = msgspec.structs.asdict
        with self.graph.batch() as batch:
            for name, given in items:
                try:
                    if name not in WRITES and name not in READS:
                        raise InvalidRequest(
                            f"{name} cannot run in a batch with writes; send it in a batch of reads"
                            if name in BATCHABLE
                            else f"a batch runs reads and writes; {name!r} is not one"
                        )
                    args = _convert(name, given) if isinstance(given, dict) else given
                    kinds[name] = kinds.get(name, 0) + 1
                    answers.append(getattr(batch, name)(**asdict(args)))
                except AssocdbError as exc:
                    answers.append(exc)
        results: list[Any] = []
        rows, max_rows = 0, self.limits.max_batch_rows
        for answer in answers:
            try:
                if isinstance(answer, AssocdbError):
                    raise answer
                result = answer.result()
            except AssocdbError as exc:
                results.append(self._item_error(exc))
                continue
            if answer.method in READS:
                rows += _rows(result)
                if rows > max_rows:  # the writes are done: only this read fails
                    results.append(self._item_error(_too_many_rows(max_rows)))
                    continue
            results.append(_One(result))
        self._count_reads(kinds, time.perf_counter() - start, len(items))
        return _encode(_Many(results))

    def _check_batch_size(self, n: int) -> None:
        if n > self.limits.max_batch:
            raise InvalidRequest(f"at most {self.limits.max_batch} requests per batch, got {n}")

    def _item_error(self, exc: AssocdbError) -> msgspec.Raw:
        self.metrics.errors.labels(exc.code).inc()
        return msgspec.Raw(error_body(exc))

    def _count_reads(self, kinds: dict[str, int], seconds: float, n: int) -> None:
        """A batch's reads, per kind, each at the batch's mean time per read."""
        mean = seconds / max(n, 1)
        for name, count in kinds.items():
            self.metrics.operation_times.add((name,), mean, count)

    def _call_of(self, name: str) -> Callable[[Any], Any]:
        """How a batch calls the read `name` with its decoded arguments."""
        if name in _SPECIAL:
            return lambda args: self._dispatch(name, args)
        if name in _ENCODED:
            return lambda args: self._encoded(name, args)
        bound = getattr(self.graph, name)
        asdict = msgspec.structs.asdict
        return lambda args: bound(**asdict(args))

    def _dispatch(self, name: str, args: Any) -> Any:
        graph = self.graph
        if name == "query_page":
            return from_spec(args.query, graph).page(args.cursor, args.limit)
        if name == "query_count":
            return from_spec(args.query, graph).count()
        if name == "schema":
            schema = graph.schema
            return SchemaInfo(schema.assoc_types, schema.object_types, schema.indexes)
        if name == "bulk_load":
            edges = [tuple(edge) for edge in args.edges]
            # A named load comes in parts, one per request (`Client.bulk_load`).
            return graph.services.writes.bulk_load(
                edges, workers=1, name=args.name, first=args.first, last=args.last
            )
        # Long calls get half the request's deadline: the answer (drained or
        # not, the build's progress) must be on its way well before the deadline.
        budget = self.limits.deadline / 2
        if name in ("drain", "deletions_wait"):
            check_drain_timeout(args.timeout)
            wait = graph.drain if name == "drain" else graph.deletions.wait
            return wait(budget if args.timeout is None else min(args.timeout, budget))
        if name == "changes":  # a long poll: an empty page before the deadline
            args.wait = min(args.wait, budget)
        if name == "index_build":  # a slice of the build; call again to go on
            seconds = budget if args.seconds is None else min(args.seconds, budget)
            return graph.index_build(args.name, rate=args.rate, seconds=seconds)
        fields = {f: getattr(args, f) for f in args.__struct_fields__}
        if name.startswith("deletions_"):  # `Graph.deletions`' methods
            return getattr(graph.deletions, name.removeprefix("deletions_"))(**fields)
        return getattr(graph, name)(**fields)

    # -- operations routes -----------------------------------------------------------------

    async def route_healthz(self, request: Request) -> Response:
        return Response(b'{"status":"ok"}', media_type=JSON)

    async def route_readyz(self, request: Request) -> Response:
        """503 with what is wrong while this worker cannot serve: shards that do not
        answer, a journal that cannot record writes (a full disk), or so many calls
        past their deadline that calls are refused (`max_overdue`)."""
        problems: dict[str, Any] = {}
        try:
            with anyio.fail_after(self.limits.deadline):
                problems = await anyio.to_thread.run_sync(self._problems, abandon_on_cancel=True)
        except TimeoutError:
            problems["shards"] = ["timeout"]
        overdue, most = self.overdue.count, self.limits.max_overdue
        if overdue >= most:
            problems["overdue"] = f"{overdue} calls still run past their deadline (at most {most})"
        if problems:
            body = _encode({"status": "unavailable", **problems})
            return Response(body, status_code=503, media_type=JSON)
        return Response(b'{"status":"ready"}', media_type=JSON)

    def _problems(self) -> dict[str, Any]:
        problems: dict[str, Any] = {}
        down = []
        for shard in range(self.graph.shards):
            try:
                self.graph.engine.backend.counts(shard, 1, 0)
            except AssocdbError:
                down.append(shard)
        if down:
            problems["shards"] = down
        why = self.graph.engine.journal.unwritable()
        if why is not None:
            problems["journal"] = why
        return problems

    async def route_metrics(self, request: Request) -> Response:
        try:
            self.tokens.authorize(request.headers.get("authorization"), "admin")
        except AssocdbError as exc:
            return self._error("metrics", exc)
        payload = await anyio.to_thread.run_sync(self.metrics.render)
        return Response(payload, media_type="text/plain; version=0.0.4")

    async def route_openapi(self, request: Request) -> Response:
        return Response(_encode(openapi(self.tokens.enabled)), media_type=JSON)

    async def route_docs(self, request: Request) -> Response:
        return HTMLResponse(docs_page())

    async def route_root(self, request: Request) -> Response:
        """One line that says where to go: a browser gets links, curl gets text."""
        if "text/html" in request.headers.get("accept", ""):
            return HTMLResponse(_LANDING_HTML)
        return Response(_LANDING, media_type="text/plain; charset=utf-8")

    # -- answers -------------------------------------------------------------------------

    async def http_error(self, request: Request, exc: Exception) -> Response:
        """Starlette's own 404/405 in the one error shape."""
        assert isinstance(exc, HTTPException)
        if exc.status_code in (404, 405):  # only a known token learns which routes exist
            try:
                self.tokens.authenticate(request.headers.get("authorization"))
            except AssocdbError as denied:
                return self._error("unknown", denied)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
        message = f"{request.method} {request.url.path}: {exc.detail}"
        allowed = ", ".join(
            m for m in (exc.headers or {}).get("Allow", "").split(", ") if m and m != "HEAD"
        )
        if exc.status_code == 405 and allowed:
            message = f"{request.method} {request.url.path}: use {allowed}, not {request.method}"
            if request.url.path.startswith("/v1/"):
                message += f", with a JSON body (Content-Type: {JSON}); see /docs"
        elif exc.status_code == 404:
            message += "; the API is POST /v1/<method> (see /docs), the console is /admin"
        body = _encode({"error": {"code": code, "message": message, "details": {}}})
        return Response(body, status_code=exc.status_code, media_type=JSON)

    def _error(self, name: str, exc: AssocdbError, start: float | None = None) -> Response:
        status = status_of(exc)
        if isinstance(exc, Unavailable):
            log.warning("%s: %s", name, exc.message)
        self.metrics.errors.labels(exc.code).inc()
        if start is not None:
            self._observe(name if name in METHODS or name == "batch" else "unknown", status, start)
        return Response(error_body(exc), status_code=status, media_type=JSON)

    def _observe(self, name: str, status: int, start: float) -> None:
        self.metrics.request_times.add((name,), time.perf_counter() - start)
        self.metrics.response_counts.add((name, str(status)), 0.0)


class Overdue:
    """How many calls still run in worker threads after their request answered
    Timeout. Python cannot stop a thread, and anyio frees an abandoned thread's
    place in its limiter: without this count, slow calls sent one after another
    would each leave one more thread running, without bound."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()


class _Call:
    """One call run in a worker thread, counted in `Overdue` while it runs abandoned
    (abandoned before it started, it does not start: its request has answered)."""

    def __init__(self, run: Callable[[bytes], bytes], overdue: Overdue) -> None:
        self._run = run
        self._overdue = overdue
        self._started = self._done = self._abandoned = False

    def __call__(self, body: bytes) -> bytes:
        with self._overdue.lock:
            if self._abandoned:
                raise Timeout("the request answered before this call started")
            self._started = True
        try:
            return self._run(body)
        finally:
            with self._overdue.lock:
                self._done = True
                if self._abandoned:
                    self._overdue.count -= 1

    def abandon(self) -> None:
        with self._overdue.lock:
            self._abandoned = True
            if self._started and not self._done:
                self._overdue.count += 1


class _One(msgspec.Struct):
    """One call's answer."""

    result: Any


class _Encoded(NamedTuple):
    """A read's answer already encoded (kept with the cache's answers), and its rows."""

    json: bytes
    rows: int


class _Many(msgspec.Struct):
    """A batch's answer: `_One`s, or errors already encoded (`msgspec.Raw`)."""

    results: list[Any]


#: The list reads whose answers the cache keeps encoded (arguments: id1, atype, …, limit).
_ENCODED = frozenset({"assoc_range", "assoc_page"})

#: Reads a batch runs through `_dispatch` (the others call the Graph method directly).
_SPECIAL = frozenset({"query_page", "query_count", "schema"})


def _batch_item(name: str) -> Any:
    """`{"method": name, "args": {...}}` as one Struct of a tagged union."""
    kind = METHODS[name].args
    try:
        kind()
        args: Any = msgspec.field(default_factory=kind)
    except TypeError:  # a required argument: no default
        args = msgspec.NODEFAULT
    return msgspec.defstruct(
        f"Batch_{name}",
        [("args", kind, args)],
        tag_field="method",
        tag=name,
        forbid_unknown_fields=True,
    )


_BATCH_ITEMS = {name: _batch_item(name) for name in sorted(BATCHABLE)}
_TypedBatch = msgspec.defstruct(
    "TypedBatch",
    [("requests", list[Union[tuple(_BATCH_ITEMS.values())]])],  # type: ignore[misc]  # noqa: UP007
    forbid_unknown_fields=True,
)


def _check_content_type(declared: str | None) -> None:
    """InvalidRequest for a body declared as something other than JSON.

    A form or text body was read as JSON all the same: `curl -d` sends a JSON
    body as a form, and a web page may post text/plain to a server on
    loopback without the browser asking first (CORS lets "simple" content
    types through). No Content-Type at all is taken as JSON.
    """
    if declared is None:
        return
    media = declared.partition(";")[0].strip().lower()
    if media != JSON and not media.endswith("+json"):
        raise InvalidRequest(
            f"the body must be JSON: send Content-Type: {JSON} "
            f"(curl: -H 'Content-Type: {JSON}'); got Content-Type {declared!r}"
        )


_LANDING = (
    "assocdb: the API is POST /v1/<method> with a JSON body, described at /docs "
    "(and /openapi.json); the operator's console is at /admin\n"
)
_LANDING_HTML = (
    "<!doctype html><title>assocdb</title>" + ICON + "<p>assocdb: the API is "
    "<code>POST /v1/&lt;method&gt;</code> with a JSON body, described at "
    '<a href="/docs">/docs</a> (and <a href="/openapi.json">/openapi.json</a>); '
    'the operator\'s console is at <a href="/admin">/admin</a>.</p>'
)


def _check_deadline(until: float) -> None:
    if time.monotonic() > until:
        raise Timeout("the batch did not finish within the request's deadline")


def _too_many_rows(limit: int) -> DataTooLarge:
    return DataTooLarge(
        f"the batch's answer would hold more than {limit:,} rows; "
        "split it into smaller batches or pages",
        limit=limit,
    )


def _rows(result: Any) -> int:
    """How many rows a read's answer holds, for the batch's answer bound."""
    if isinstance(result, list):
        return len(result)
    items = getattr(result, "items", None)
    return len(items) if isinstance(items, list) else 1


def _convert(name: str, args: dict[str, Any]) -> Any:
    """A batch item's arguments as the method's Struct, or InvalidRequest."""
    try:
        return msgspec.convert(args, METHODS[name].args)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(f"{name}: {exc}{_id_hint(exc)}") from None
    except RecursionError:
        raise InvalidRequest(f"{name}: {TOO_DEEP}") from None


def _id_hint(exc: msgspec.ValidationError) -> str:
    """A hint for an id sent as a string (by a JavaScript client, most likely)."""
    if str(exc).startswith("Expected `int`, got `str`"):
        return " (to send and receive ids as strings, add the header X-Assocdb-Ids: string)"
    return ""


def _decode(body: bytes, kind: Any) -> Any:
    try:
        return msgspec.json.decode(body or b"{}", type=kind)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(f"invalid arguments: {exc}{_id_hint(exc)}") from None
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"the body is not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"the body is not valid UTF-8 JSON: {exc.reason}") from None
    except RecursionError:
        raise InvalidRequest(TOO_DEEP) from None


TOO_DEEP = (
    f"the body's JSON nests too deeply (data nests at most {MAX_DEPTH} levels, queries at most 32)"
)
