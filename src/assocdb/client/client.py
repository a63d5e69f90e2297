"""Client: the Graph API over HTTP, with the same methods, arguments and return types.

Code switches between embedded and remote by changing one line:

    g = assocdb.open("data/graph")
    g = assocdb.Client(["http://10.0.0.1:8080", "http://10.0.0.2:8080"], token=…)

It keeps pooled keep-alive connections (httpx), gives every call an
aggressive timeout, and fails over: a server that does not answer is skipped
for a while and the call goes to the next one. Calls are retried there —
safely, since every write is an idempotent merge — except `obj_add` without an
id, which is retried only when the request never left (a retry after a lost
answer could create a second object).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import msgspec

from ..core.deletion import Deletion
from ..core.errors import AssocdbError, InvalidRequest, Timeout, Unavailable
from ..core.extras import needs
from ..core.feed import FEED_LIMIT
from ..core.pagers import items, pages
from ..core.query import Lists, Query, Term
from ..core.records import (
    Assoc,
    CacheStats,
    Change,
    ChangeKind,
    ChangePage,
    Count,
    CountMismatch,
    Direction,
    HangingEdge,
    HotKey,
    IndexCheck,
    IndexPage,
    IndexStatus,
    JobInfo,
    JobState,
    Mode,
    Obj,
    Page,
    QueueStats,
    StateName,
    TimelineConfig,
    TimelineItem,
    WriteResult,
)
from ..core.schema import DEFAULT_LIMIT, AssocType, ObjectType, OnDelete, Schema
from .batch import Batch, checked
from .deletions import RemoteDeletions
from .wire import (
    METHODS,
    Args,
    AssocAdd,
    AssocChangeType,
    AssocCount,
    AssocGet,
    AssocKey,
    AssocPage,
    AssocRange,
    AssocTimeRange,
    AssocWrite,
    BulkLoad,
    CheckCounts,
    DefineAssoc,
    DefineIndex,
    DefineObject,
    DefineTimeline,
    Drain,
    ErrorEnvelope,
    FeedCommit,
    HomeTimeline,
    IndexBuild,
    IndexCheckArgs,
    IndexName,
    IndexQuery,
    NoArgs,
    NodeState,
    NodeWrite,
    ObjAdd,
    ObjDelete,
    ObjId,
    ObjUpdate,
    Post,
    PostDelete,
    QueryCount,
    QueryPage,
    QueueJobs,
    QueueReinject,
    SchemaInfo,
    UserTimeline,
    error_from,
    to_spec,
)
from .wire import Changes as ChangesArgs
from .wire import HotKeys as HotKeysArgs

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")
_DOWN_FOR = 2.0  # seconds a server that failed is skipped
_BULK_CHUNK = 20_000  # edges per bulk_load request
#: JSON bytes of edges per bulk_load request: half the server's default body limit
#: (4 MiB), as edges with data reach it long before 20,000 of them.
_BULK_BYTES = 2 << 20
_errors_decoder = msgspec.json.Decoder(ErrorEnvelope)
_results: dict[str, msgspec.json.Decoder[Any]] = {
    name: msgspec.json.Decoder(msgspec.defstruct(f"{name}_result", [("result", m.result)]))
    for name, m in METHODS.items()
}


class Client:
    """A remote graph: the Graph API through one or more assocdb servers.

    >>> with assocdb.Client("http://127.0.0.1:8080", token=os.environ["TOKEN"]) as g:
    ...     g.assoc_add(1, "follows", 2)
    """

    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        token: str | None = None,
        timeout: float = 2.0,
        retries: int = 2,
        connections: int = 16,
    ) -> None:
        chosen = [urls] if isinstance(urls, str) else list(urls)
        if not chosen or not all(
            isinstance(u, str) and u.startswith(("http://", "https://")) for u in chosen
        ):
            raise InvalidRequest(f"urls must be one or more http(s) URLs, got {urls!r}")
        _check_token(token)
        self._urls = [u.rstrip("/") for u in chosen]
        self._down_until = [0.0] * len(self._urls)
        self._next = 0
        self._retries = retries
        self._budget = timeout / 2  # what a long call (drain, a build slice) may take
        #: Cascading deletions on the server (`Graph.deletions`' calls over HTTP). `_call`
        #: is looked up at each call, so what wraps it (a test's spy) sees these too.
        call = lambda name, args: self._call(name, args)  # noqa: E731, PLW0108
        self.deletions = RemoteDeletions(call, self._budget)
        with needs("client", "assocdb.Client"):  # here, not at the top: `import assocdb`
            import httpx  # stays light, and works without the client extra

        self._httpx = httpx
        headers = {"content-type": "application/json"}
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        self._http = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        )

    # -- the transport ------------------------------------------------------------------

    def _within_budget(self, seconds: Any) -> Any:
        """A long call's seconds, capped so its answer comes within this client's timeout
        (what is not a number goes as it is, for the server to reject)."""
        if seconds is None:
            return self._budget
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
            return min(seconds, self._budget)
        return seconds

    def _call(self, name: str, args: Args) -> Any:
        safe = not (name == "obj_add" and getattr(args, "id", None) is None)
        content = self._post(f"/v1/{name}", _encode(name, args), safe)
        return _results[name].decode(content).result

    def _call_batch(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # Sent again on another server only if every item may run twice (an
        # obj_add without an id would add a second object).
        safe = not any(r["method"] == "obj_add" and r["args"].get("id") is None for r in requests)
        content = self._post("/v1/batch", _encode("batch", {"requests": requests}), safe)
        answers: list[dict[str, Any]] = msgspec.json.decode(content)["results"]
        return answers

    def _post(self, path: str, body: bytes, safe: bool) -> bytes:
        """POST to a healthy server, failing over; the body of a 200 answer, or the error."""
        httpx = self._httpx
        failure: AssocdbError | None = None
        for _ in range(self._retries + 1):
            server = self._pick()
            url = self._urls[server]
            try:
                response = self._http.post(url + path, content=body)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # nothing was sent
                failure = self._down(server, Unavailable(f"{url}: {exc}"))
                continue
            except httpx.TimeoutException as exc:
                failure = self._down(server, Timeout(f"{url}{path} timed out: {exc}"))
            except httpx.TransportError as exc:
                failure = self._down(server, Unavailable(f"{url}: {exc}"))
            else:
                if response.status_code == 200:
                    return response.content
                failure = _error(response)
                if not isinstance(failure, Unavailable):
                    raise failure
            if not safe:  # the request may have taken effect: do not repeat it
                raise failure
        assert failure is not None
        raise failure

    def _pick(self) -> int:
        now = time.monotonic()
        count = len(self._urls)
        for step in range(count):
            server = (self._next + step) % count
            if self._down_until[server] <= now:
                self._next = (server + 1) % count
                return server
        server = min(
            range(count), key=self._down_until.__getitem__
        )  # all down: try the soonest back
        self._next = (server + 1) % count
        return server

    def _down(self, server: int, error: AssocdbError) -> AssocdbError:
        self._down_until[server] = time.monotonic() + _DOWN_FOR
        return error

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def batch(self) -> Batch:
        """Many reads and writes in one round trip, as `Graph.batch()`: the writes go
        through the server's write pipeline together (one journal fsync, one
        transaction per touched shard), and a read sees the writes before it.

        >>> with g.batch() as b:
        ...     b.assoc_add(1, "follows", 2)
        ...     n = b.assoc_count(1, "follows")
        ...     page = b.assoc_page(1, "follows")
        >>> n.result(), page.result().items
        """
        return Batch(self)

    # -- schema ---------------------------------------------------------------------------

    @property
    def schema(self) -> Schema:
        """The association and object types defined so far."""
        info: SchemaInfo = self._call("schema", NoArgs())
        return Schema(info.assoc, info.object, info.index)

    def define_assoc(
        self,
        name: str,
        *,
        inverse: str | None = None,
        symmetric: bool = False,
        limit: int = DEFAULT_LIMIT,
        ttl: float | timedelta | None = None,
        on_delete: OnDelete | None = None,
    ) -> AssocType:
        seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else ttl
        args = DefineAssoc(name, inverse, symmetric, limit, seconds, on_delete)
        result: AssocType = self._call("define_assoc", args)
        return result

    def define_object(self, name: str, *, owned: bool | None = None) -> ObjectType:
        result: ObjectType = self._call("define_object", DefineObject(name, owned))
        return result

    def load_schema(self, path: str | Path) -> None:
        """Apply every definition of a TOML schema file (checked here before anything is sent)."""
        schema = Schema().apply_toml(Path(path).read_text(encoding="utf-8"))
        for kind in schema.assoc_types:  # an inverse too: it has its own on_delete
            self.define_assoc(
                kind.name,
                inverse=kind.inverse,
                symmetric=kind.symmetric,
                limit=kind.limit,
                ttl=kind.ttl,
                on_delete=kind.on_delete,
            )
        for otype in schema.object_types:
            self.define_object(otype.name, owned=otype.owned)
        for index in schema.indexes:
            otype_name = schema.object_by_id(index.otype).name
            self.define_index(
                index.name,
                otype_name,
                index.properties,
                order=index.order,
                unique=index.unique,
                shard_on=index.shard_on,
            )

    # -- objects ---------------------------------------------------------------------------

    def obj_add(
        self,
        otype: str,
        data: dict[str, Any] | None = None,
        *,
        id: int | None = None,
        near: int | None = None,
        updated_at: int | None = None,
    ) -> int:
        result: int = self._call("obj_add", ObjAdd(otype, data, id, near, updated_at))
        return result

    def obj_get(self, id: int) -> Obj | None:
        result: Obj | None = self._call("obj_get", ObjId(id))
        return result

    def obj_update(
        self, id: int, data: dict[str, Any], *, updated_at: int | None = None
    ) -> WriteResult:
        result: WriteResult = self._call("obj_update", ObjUpdate(id, data, updated_at))
        return result

    def obj_delete(
        self, id: int, *, updated_at: int | None = None, cascade: bool = False
    ) -> WriteResult:
        result: WriteResult = self._call("obj_delete", ObjDelete(id, updated_at, cascade))
        return result

    def obj_restore(self, id: int) -> Deletion:
        result: Deletion = self._call("obj_restore", ObjId(id))
        return result

    # -- association writes ------------------------------------------------------------------

    def assoc_add(
        self,
        id1: int,
        atype: str,
        id2: int,
        time: int | None = None,
        data: Any = None,
        updated_at: int | None = None,
    ) -> WriteResult:
        result: WriteResult = self._call(
            "assoc_add", AssocAdd(id1, atype, id2, time, data, updated_at)
        )
        return result

    def assoc_delete(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> WriteResult:
        return self._write("assoc_delete", id1, atype, id2, updated_at)

    def assoc_archive(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> WriteResult:
        return self._write("assoc_archive", id1, atype, id2, updated_at)

    def assoc_negate(
        self, id1: int, atype: str, id2: int, updated_at: int | None = None
    ) -> WriteResult:
        return self._write("assoc_negate", id1, atype, id2, updated_at)

    def _write(
        self, name: str, id1: int, atype: str, id2: int, updated_at: int | None
    ) -> WriteResult:
        result: WriteResult = self._call(name, AssocWrite(id1, atype, id2, updated_at))
        return result

    def assoc_change_type(
        self, id1: int, atype: str, id2: int, new_atype: str, updated_at: int | None = None
    ) -> WriteResult:
        args = AssocChangeType(id1, atype, id2, new_atype, updated_at)
        result: WriteResult = self._call("assoc_change_type", args)
        return result

    def bulk_load(
        self,
        edges: Iterable[Sequence[Any]],
        *,
        workers: int | None = None,
        progress: Callable[[int], None] | None = None,
        name: str | None = None,
    ) -> int:
        """Load edges through the server, up to 20,000 (and 2 MiB of JSON) per request
        (`workers` is up to the server). A named load resumes as `Graph.bulk_load`'s:
        the server skips the parts it has stored."""
        total, size = 0, 0
        chunk: list[list[Any]] = []
        for edge in edges:
            edge_size = _json_size(edge)
            if chunk and (len(chunk) == _BULK_CHUNK or size + edge_size > _BULK_BYTES):
                total += self._load_part(chunk, name, total, last=False)
                chunk, size = [], 0
                if progress is not None:
                    progress(total)
            chunk.append(list(edge))
            size += edge_size
        if chunk or name is not None:  # a named load's last part ends it
            total += self._load_part(chunk, name, total, last=True)
        if progress is not None:
            progress(total)
        return total

    def _load_part(self, chunk: list[list[Any]], name: str | None, first: int, last: bool) -> int:
        stored: int = self._call("bulk_load", BulkLoad(chunk, name, first, last))
        return len(chunk) if name is not None else stored

    # -- association reads --------------------------------------------------------------------

    def assoc_get(
        self,
        id1: int,
        atype: str,
        id2s: Iterable[int],
        high: int | None = None,
        low: int | None = None,
    ) -> list[Assoc]:
        result: list[Assoc] = self._call("assoc_get", AssocGet(id1, atype, _ids(id2s), high, low))
        return result

    def assoc_count(self, id1: int, atype: str, state: StateName = "normal") -> int:
        result: int = self._call("assoc_count", AssocCount(id1, atype, state))
        return result

    def assoc_contains(self, id1: int, atype: str, id2: int) -> bool:
        result: bool = self._call("assoc_contains", AssocKey(id1, atype, id2))
        return result

    def assoc_edge(self, id1: int, atype: str, id2: int) -> Assoc | None:
        result: Assoc | None = self._call("assoc_edge", AssocKey(id1, atype, id2))
        return result

    def assoc_range(self, id1: int, atype: str, pos: int = 0, limit: int = 50) -> list[Assoc]:
        result: list[Assoc] = self._call("assoc_range", AssocRange(id1, atype, pos, limit))
        return result

    def assoc_time_range(
        self, id1: int, atype: str, high: int, low: int, limit: int = 50
    ) -> list[Assoc]:
        args = AssocTimeRange(id1, atype, high, low, limit)
        result: list[Assoc] = self._call("assoc_time_range", args)
        return result

    def assoc_page(
        self, id1: int, atype: str, cursor: str | None = None, limit: int = 50
    ) -> Page[Assoc]:
        result: Page[Assoc] = self._call("assoc_page", AssocPage(id1, atype, cursor, limit))
        return result

    def assoc_pages(self, id1: int, atype: str, limit: int = 500) -> Iterator[Page[Assoc]]:
        """Every page of the list, newest first, following `next_cursor`.

        >>> for page in g.assoc_pages(celebrity, "followed_by", limit=1000):
        ...     notify(page.items)
        """
        return pages(lambda cursor: self.assoc_page(id1, atype, cursor, limit))

    def assoc_iter(self, id1: int, atype: str, limit: int = 500) -> Iterator[Assoc]:
        """Every association of the list, newest first, read `limit` at a time
        (`assoc_pages`); it ends after the last one.

        >>> for follow in g.assoc_iter(celebrity, "followed_by"):
        ...     notify(follow.id2)
        """
        return items(lambda cursor: self.assoc_page(id1, atype, cursor, limit))

    # -- set arithmetic -------------------------------------------------------------------------

    def select(
        self,
        node: int | Iterable[int] | Query,
        atype: str,
        *,
        incoming: bool = False,
        states: Sequence[StateName] = ("normal",),
        id2s: Iterable[int] | None = None,
    ) -> Query:
        """A query term (of many lists if `node` is ids or a query); see `Graph.select`.
        Types are checked when it runs."""
        if type(node) is int:
            return Term(self, node, atype, incoming, states, id2s)
        return Lists(self, node, atype, incoming, states, id2s)  # type: ignore[arg-type]

    def _query_page(self, query: Query, cursor: str | None, limit: int) -> Page[int]:
        result: Page[int] = self._call("query_page", QueryPage(to_spec(query), cursor, limit))
        return result

    def _query_count(self, query: Query) -> Count:
        result: Count = self._call("query_count", QueryCount(to_spec(query)))
        return result

    # -- whole nodes ------------------------------------------------------------------------------

    def node_archive(
        self, node: int, atype: str, *, direction: Direction = "out", updated_at: int | None = None
    ) -> WriteResult:
        return self._node("node_archive", node, atype, direction, updated_at)

    def node_unarchive(
        self, node: int, atype: str, *, direction: Direction = "out", updated_at: int | None = None
    ) -> WriteResult:
        return self._node("node_unarchive", node, atype, direction, updated_at)

    def node_negate(
        self, node: int, atype: str, *, direction: Direction = "out", updated_at: int | None = None
    ) -> WriteResult:
        return self._node("node_negate", node, atype, direction, updated_at)

    def node_remove(
        self, node: int, atype: str, *, direction: Direction = "out", updated_at: int | None = None
    ) -> WriteResult:
        return self._node("node_remove", node, atype, direction, updated_at)

    def _node(
        self, name: str, node: int, atype: str, direction: Direction, updated_at: int | None
    ) -> WriteResult:
        result: WriteResult = self._call(name, NodeWrite(node, atype, direction, updated_at))
        return result

    def node_state(
        self, node: int, atype: str, *, direction: Literal["out", "in"] = "out"
    ) -> StateName:
        result: StateName = self._call("node_state", NodeState(node, atype, direction))
        return result

    # -- the journal and maintenance ------------------------------------------------------------

    def queue_stats(self) -> QueueStats:
        result: QueueStats = self._call("queue_stats", NoArgs())
        return result

    def queue_jobs(
        self, state: JobState = "error", *, after: int = 0, limit: int = 100
    ) -> list[JobInfo]:
        result: list[JobInfo] = self._call("queue_jobs", QueueJobs(state, after, limit))
        return result

    def queue_job(self, id: int) -> JobInfo | None:
        result: JobInfo | None = self._call("queue_job", ObjId(id))
        return result

    def queue_retry(self) -> int:
        result: int = self._call("queue_retry", NoArgs())
        return result

    def queue_reinject(self, ids: Iterable[int] | None = None) -> int:
        result: int = self._call(
            "queue_reinject", QueueReinject(None if ids is None else _ids(ids))
        )
        return result

    def drain(self, timeout: float | None = None) -> bool:
        """Wait for the server's queue to empty, at most half this client's timeout
        (and half the server's deadline); False if it did not (call again)."""
        result: bool = self._call("drain", Drain(self._within_budget(timeout)))
        return result

    def check_counts(self, *, repair: bool = False) -> list[CountMismatch]:
        result: list[CountMismatch] = self._call("check_counts", CheckCounts(repair))
        return result

    def cache_stats(self) -> CacheStats | None:
        result: CacheStats | None = self._call("cache_stats", NoArgs())
        return result

    def hot_keys(self, n: int = 20) -> list[HotKey]:
        result: list[HotKey] = self._call("hot_keys", HotKeysArgs(n))
        return result

    def check_inverses(self, *, repair: bool = False) -> list[HangingEdge]:
        result: list[HangingEdge] = self._call("check_inverses", CheckCounts(repair))
        return result

    # -- timelines --------------------------------------------------------------------------------

    def define_timeline(
        self,
        follows: str = "follows",
        *,
        mode: Mode = "write",
        cap: int = 800,
        celebrity_threshold: int = 10_000,
        posts: str = "posted",
    ) -> TimelineConfig:
        args = DefineTimeline(follows, mode, cap, celebrity_threshold, posts)
        result: TimelineConfig = self._call("define_timeline", args)
        return result

    def timeline_config(self) -> TimelineConfig | None:
        result: TimelineConfig | None = self._call("timeline_config", NoArgs())
        return result

    def post(
        self, author: int, item: int, time: int | None = None, updated_at: int | None = None
    ) -> WriteResult:
        result: WriteResult = self._call("post", Post(author, item, time, updated_at))
        return result

    def post_delete(self, author: int, item: int, updated_at: int | None = None) -> WriteResult:
        result: WriteResult = self._call("post_delete", PostDelete(author, item, updated_at))
        return result

    def home_timeline(
        self, user: int, cursor: str | None = None, limit: int = 50, mode: Mode | None = None
    ) -> Page[TimelineItem]:
        args = HomeTimeline(user, cursor, limit, mode)
        result: Page[TimelineItem] = self._call("home_timeline", args)
        return result

    def user_timeline(
        self, author: int, cursor: str | None = None, limit: int = 50
    ) -> Page[TimelineItem]:
        args = UserTimeline(author, cursor, limit)
        result: Page[TimelineItem] = self._call("user_timeline", args)
        return result

    # -- secondary indexes ------------------------------------------------------------------

    def define_index(
        self,
        name: str,
        otype: str,
        properties: list[str],
        *,
        order: str | None = None,
        unique: bool = False,
        shard_on: str | None = None,
    ) -> IndexStatus:
        args = DefineIndex(name, otype, properties, order, unique, shard_on)
        result: IndexStatus = self._call("define_index", args)
        return result

    def drop_index(self, name: str) -> None:
        self._call("drop_index", IndexName(name))

    def indexes(self) -> list[IndexStatus]:
        result: list[IndexStatus] = self._call("indexes", NoArgs())
        return result

    def index_status(self, name: str) -> IndexStatus:
        result: IndexStatus = self._call("index_status", IndexName(name))
        return result

    def index_query(
        self,
        name: str,
        eq: Sequence[Any] = (),
        low: Any = None,
        high: Any = None,
        *,
        desc: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> IndexPage:
        if isinstance(eq, (str, bytes)) or not isinstance(eq, Sequence):
            raise InvalidRequest(f"eq must be a list of values, got {eq!r}")
        args = IndexQuery(name, list(eq), low, high, desc, limit, cursor)
        result: IndexPage = self._call("index_query", args)
        return result

    def index_check(self, name: str, *, repair: bool = False) -> IndexCheck:
        result: IndexCheck = self._call("index_check", IndexCheckArgs(name, repair))
        return result

    def index_build(
        self, name: str, *, rate: float | None = None, seconds: float | None = None
    ) -> IndexStatus:
        """A slice of the build, within half this client's timeout (and half the server's
        request deadline); call again to go on."""
        result: IndexStatus = self._call(
            "index_build", IndexBuild(name, rate, self._within_budget(seconds))
        )
        return result

    def index_repair_recent(self, name: str) -> IndexCheck:
        result: IndexCheck = self._call("index_repair_recent", IndexName(name))
        return result

    def enable_feed(self) -> None:
        self._call("enable_feed", NoArgs())

    def changes(
        self,
        cursor: str | None = None,
        *,
        limit: int = FEED_LIMIT,
        types: list[str] | None = None,
        kinds: list[ChangeKind] | None = None,
        group: str | None = None,
        wait: float = 0.0,
        member: str | None = None,
    ) -> ChangePage:
        args = ChangesArgs(cursor, limit, types, kinds, group, self._within_budget(wait), member)
        result: ChangePage = self._call("changes", args)
        return result

    def follow_changes(
        self, cursor: str | None = None, *, types: list[str] | None = None
    ) -> Iterator[Change]:
        """Every change after `cursor`, by long polls of the server, until closed."""
        while True:
            page = self.changes(cursor, types=types, wait=self._within_budget(30.0))
            yield from page.items
            cursor = page.next_cursor

    def feed_commit(self, group: str, cursor: str, member: str | None = None) -> None:
        self._call("feed_commit", FeedCommit(group, cursor, member))


def _json_size(value: Any) -> int:
    """The bytes `value` takes in a request's JSON (0 if it has none: then the
    request's checks say why)."""
    try:
        return len(msgspec.json.encode(value))
    except (TypeError, ValueError, OverflowError):
        return 0


def _encode(name: str, args: Any) -> bytes:
    """The request's body: its arguments checked (a batch's were, as they were queued)."""
    if isinstance(args, Args):
        checked(name, args)
    try:
        return msgspec.json.encode(args)
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        raise InvalidRequest(
            f"{name}: a string holds {bad!r}, a lone surrogate: not Unicode text that JSON "
            "(UTF-8) can hold"
        ) from None


def _error(response: httpx.Response) -> AssocdbError:
    try:
        return error_from(_errors_decoder.decode(response.content).error)
    except msgspec.MsgspecError:
        return Unavailable(f"HTTP {response.status_code} from the server: {response.text[:200]!r}")


def _ids(ids: Iterable[int]) -> list[int]:
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise InvalidRequest(f"ids must be a list of ids, got {type(ids).__name__}")
    return list(ids)


def _check_token(token: object) -> None:
    """InvalidRequest for a token no server could take (httpx refused it at the first
    request, as `Unavailable`, which reads as "the server is down")."""
    if token is None:
        return
    if not isinstance(token, str):
        raise InvalidRequest(f"token must be a string, got {type(token).__name__}")
    if not token.strip():
        raise InvalidRequest(
            "token is empty: give the server's token (is the variable you read it from "
            "set?), or token=None for a server without tokens"
        )
    if not (token.isascii() and token.isprintable()) or token != token.strip():
        raise InvalidRequest("token must be printable ASCII without surrounding spaces")
