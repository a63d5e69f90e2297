"""The HTTP API's vocabulary: one table of methods, shared by server, client and docs.

The API is RPC over JSON (as Twirp does it): every Graph method `m` is
`POST /v1/m` with a JSON object of its arguments, answered by
`{"result": …}` or by `{"error": {"code", "message", "details"}}` with an
HTTP status from `STATUS`. Each method's arguments are a msgspec Struct whose
fields are the Graph method's parameters, in order, with the same defaults;
the result type is the Graph method's return type. So the server decodes and
validates a request in one call, the client encodes with the same types and
decodes into the same records, the OpenAPI document is generated from this
table, and `POST /v1/batch` runs a list of `{method, args}` reads.

Set-arithmetic queries travel as a tree of `TermSpec` and operator specs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NamedTuple

import msgspec

from ..core import errors as _errors
from ..core.deletion import DanglingReport, Deletion
from ..core.errors import AssocdbError, InvalidRequest
from ..core.feed import FEED_LIMIT
from ..core.query import Difference, Intersect, Lists, Query, Runner, Term
from ..core.records import (
    Assoc,
    CacheStats,
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
    Obj,
    Page,
    QueueStats,
    StateName,
    TimelineConfig,
    TimelineItem,
    WriteResult,
)
from ..core.schema import DEFAULT_LIMIT, AssocType, IndexDef, ObjectType, OnDelete

Scope = Literal["read", "write", "admin"]


#: Every integer on the wire fits a signed 64-bit integer, like every stored one;
#: finer checks (ids start at 1) are the library's, with its messages.
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class Args(msgspec.Struct, forbid_unknown_fields=True):
    """Arguments of one method call (subclasses list the parameters)."""


# -- queries ----------------------------------------------------------------------------


class TermSpec(msgspec.Struct, tag="term", forbid_unknown_fields=True):
    node: Int64
    atype: str
    incoming: bool = False
    states: list[StateName] = msgspec.field(default_factory=lambda: ["normal"])
    id2s: list[Int64] | None = None


class ListsSpec(msgspec.Struct, tag="lists", forbid_unknown_fields=True):
    """Many lists of one type (`Lists`): `nodes` is ids or a query giving them."""

    nodes: list[Int64] | QuerySpec
    atype: str
    incoming: bool = False
    states: list[StateName] = msgspec.field(default_factory=lambda: ["normal"])
    id2s: list[Int64] | None = None


class IntersectSpec(msgspec.Struct, tag="intersect", forbid_unknown_fields=True):
    parts: list[QuerySpec]


class UnionSpec(msgspec.Struct, tag="union", forbid_unknown_fields=True):
    parts: list[QuerySpec]


class DifferenceSpec(msgspec.Struct, tag="difference", forbid_unknown_fields=True):
    left: QuerySpec
    right: QuerySpec


QuerySpec = TermSpec | ListsSpec | IntersectSpec | UnionSpec | DifferenceSpec


def to_spec(query: Query) -> QuerySpec:
    """The wire form of a query."""
    if isinstance(query, Term):
        states: list[Any] = list(query.states)
        id2s = None if query.id2s is None else list(query.id2s)
        return TermSpec(query.node, query.atype, query.incoming, states, id2s)
    if isinstance(query, Lists):
        nodes = to_spec(query.nodes) if isinstance(query.nodes, Query) else list(query.nodes)
        id2s = None if query.id2s is None else list(query.id2s)
        states = list(query.states)
        return ListsSpec(nodes, query.atype, query.incoming, states, id2s)
    if isinstance(query, Difference):
        return DifferenceSpec(to_spec(query.left), to_spec(query.right))
    parts = [to_spec(p) for p in query.parts]  # type: ignore[attr-defined]
    return IntersectSpec(parts) if isinstance(query, Intersect) else UnionSpec(parts)


MAX_QUERY_TERMS = 256  # terms in one query sent over the wire


def from_spec(spec: QuerySpec, runner: Runner, depth: Int64 = 0) -> Query:
    """The query a wire form describes, checked (ids, states, nesting, size)."""
    if depth > 32:
        raise InvalidRequest("queries nest at most 32 levels deep")
    if depth == 0 and _has_more_terms(spec, MAX_QUERY_TERMS):
        raise InvalidRequest(f"a query holds at most {MAX_QUERY_TERMS} terms")
    if isinstance(spec, TermSpec):
        return Term(runner, spec.node, spec.atype, spec.incoming, spec.states, spec.id2s)
    if isinstance(spec, ListsSpec):
        nodes = spec.nodes
        of = nodes if isinstance(nodes, list) else from_spec(nodes, runner, depth + 1)
        return Lists(runner, of, spec.atype, spec.incoming, spec.states, spec.id2s)
    if isinstance(spec, DifferenceSpec):
        left, right = (
            from_spec(spec.left, runner, depth + 1),
            from_spec(spec.right, runner, depth + 1),
        )
        return left.difference(right)
    if not spec.parts:
        raise InvalidRequest(f"{type(spec).__name__[:-4].lower()} needs at least one query")
    first, *rest = (from_spec(p, runner, depth + 1) for p in spec.parts)
    if not rest:
        return first
    return first.intersect(*rest) if isinstance(spec, IntersectSpec) else first.union(*rest)


def _has_more_terms(spec: QuerySpec, limit: int) -> bool:
    """Whether the query tree holds more than `limit` terms (stops counting there)."""
    pending, terms = [spec], 0
    while pending:
        node = pending.pop()
        if isinstance(node, TermSpec):
            terms += 1
            if terms > limit:
                return True
        elif isinstance(node, DifferenceSpec):
            pending += [node.left, node.right]
        elif isinstance(node, ListsSpec):  # a term, and its query of nodes if it has one
            terms += 1
            if terms > limit:
                return True
            if not isinstance(node.nodes, list):
                pending.append(node.nodes)
        else:
            pending += node.parts
    return False


# -- method arguments (fields in the order of the Graph method's parameters) -----------


class ObjAdd(Args):
    otype: str
    data: dict[str, Any] | None = None
    id: Int64 | None = None
    near: Int64 | None = None
    updated_at: Int64 | None = None


class ObjId(Args):
    id: Int64


class ObjUpdate(Args):
    id: Int64
    data: dict[str, Any]
    updated_at: Int64 | None = None


class ObjDelete(Args):
    id: Int64
    updated_at: Int64 | None = None
    cascade: bool = False


class AssocAdd(Args):
    id1: Int64
    atype: str
    id2: Int64
    time: Int64 | None = None
    data: Any = None
    updated_at: Int64 | None = None


class AssocWrite(Args):
    id1: Int64
    atype: str
    id2: Int64
    updated_at: Int64 | None = None


class AssocChangeType(Args):
    id1: Int64
    atype: str
    id2: Int64
    new_atype: str
    updated_at: Int64 | None = None


class AssocGet(Args):
    id1: Int64
    atype: str
    id2s: list[Int64]
    high: Int64 | None = None
    low: Int64 | None = None


class AssocCount(Args):
    id1: Int64
    atype: str
    state: StateName = "normal"


class AssocKey(Args):
    id1: Int64
    atype: str
    id2: Int64


class AssocRange(Args):
    id1: Int64
    atype: str
    pos: Int64 = 0
    limit: Int64 = 50


class AssocTimeRange(Args):
    id1: Int64
    atype: str
    high: Int64
    low: Int64
    limit: Int64 = 50


class AssocPage(Args):
    id1: Int64
    atype: str
    cursor: str | None = None
    limit: Int64 = 50


class QueryPage(Args):
    query: QuerySpec
    cursor: str | None = None
    limit: Int64 = 50


class QueryCount(Args):
    query: QuerySpec


class NodeWrite(Args):
    node: Int64
    atype: str
    direction: Direction = "out"
    updated_at: Int64 | None = None


class NodeState(Args):
    node: Int64
    atype: str
    direction: Literal["out", "in"] = "out"


class DefineAssoc(Args):
    name: str
    inverse: str | None = None
    symmetric: bool = False
    limit: Int64 = DEFAULT_LIMIT
    ttl: float | None = None  # seconds (`core.ttl`)
    on_delete: OnDelete | None = None


class DefineObject(Args):
    name: str
    owned: bool | None = None


class NoArgs(Args):
    pass


class QueueJobs(Args):
    state: JobState = "error"
    after: Int64 = 0
    limit: Int64 = 100


class QueueReinject(Args):
    ids: list[Int64] | None = None


class Drain(Args):
    timeout: float | None = None


class Changes(Args):
    cursor: str | None = None
    limit: Int64 = FEED_LIMIT
    types: list[str] | None = None
    kinds: list[ChangeKind] | None = None
    group: str | None = None
    wait: float = 0.0  # a long poll: the server waits up to half its deadline
    member: str | None = None  # of `group`: reads the shards dealt to it


class FeedCommit(Args):
    group: str
    cursor: str
    member: str | None = None


class CheckCounts(Args):
    repair: bool = False


class HotKeys(Args):
    n: Int64 = 20


class BulkLoad(Args):
    edges: list[list[Any]]
    name: str | None = None  # a resumable load (Graph.bulk_load), sent in parts:
    first: Int64 = 0  # this part's first edge's position in the whole load
    last: bool = True  # the load ends with this part


class Post(Args):
    author: Int64
    item: Int64
    time: Int64 | None = None
    updated_at: Int64 | None = None


class PostDelete(Args):
    author: Int64
    item: Int64
    updated_at: Int64 | None = None


class HomeTimeline(Args):
    user: Int64
    cursor: str | None = None
    limit: Int64 = 50
    mode: Literal["write", "read", "hybrid"] | None = None


class UserTimeline(Args):
    author: Int64
    cursor: str | None = None
    limit: Int64 = 50


class DefineTimeline(Args):
    follows: str = "follows"
    mode: Literal["write", "read", "hybrid"] = "write"
    cap: Int64 = 800
    celebrity_threshold: Int64 = 10_000
    posts: str = "posted"


class DefineIndex(Args):
    name: str
    otype: str
    properties: list[str]
    order: str | None = None
    unique: bool = False
    shard_on: str | None = None


class IndexName(Args):
    name: str


class IndexQuery(Args):
    name: str
    eq: list[Any] = []
    low: Any = None
    high: Any = None
    desc: bool = False
    limit: Int64 = 50
    cursor: str | None = None


class IndexCheckArgs(Args):
    name: str
    repair: bool = False


class IndexBuild(Args):
    name: str
    rate: Annotated[float, msgspec.Meta(gt=0)] | None = None
    seconds: Annotated[float, msgspec.Meta(ge=0)] | None = None


class SchemaInfo(msgspec.Struct, frozen=True):
    """The defined types (what `GET`-like `schema` returns): Schema's lists."""

    assoc: list[AssocType]
    object: list[ObjectType]
    index: list[IndexDef] = []  # a server from before indexes sends none


# -- the table --------------------------------------------------------------------------


class Method(NamedTuple):
    name: str
    args: type[Args]
    result: Any
    scope: Scope


METHODS: dict[str, Method] = {
    m.name: m
    for m in [
        Method("obj_add", ObjAdd, int, "write"),
        Method("obj_get", ObjId, Obj | None, "read"),
        Method("obj_update", ObjUpdate, WriteResult, "write"),
        Method("obj_delete", ObjDelete, WriteResult, "write"),
        Method("assoc_add", AssocAdd, WriteResult, "write"),
        Method("assoc_delete", AssocWrite, WriteResult, "write"),
        Method("assoc_archive", AssocWrite, WriteResult, "write"),
        Method("assoc_negate", AssocWrite, WriteResult, "write"),
        Method("assoc_change_type", AssocChangeType, WriteResult, "write"),
        Method("assoc_get", AssocGet, list[Assoc], "read"),
        Method("assoc_count", AssocCount, int, "read"),
        Method("assoc_contains", AssocKey, bool, "read"),
        Method("assoc_edge", AssocKey, Assoc | None, "read"),
        Method("assoc_range", AssocRange, list[Assoc], "read"),
        Method("assoc_time_range", AssocTimeRange, list[Assoc], "read"),
        Method("assoc_page", AssocPage, Page[Assoc], "read"),
        Method("query_page", QueryPage, Page[int], "read"),
        Method("query_count", QueryCount, Count, "read"),
        Method("node_archive", NodeWrite, WriteResult, "write"),
        Method("node_unarchive", NodeWrite, WriteResult, "write"),
        Method("node_negate", NodeWrite, WriteResult, "write"),
        Method("node_remove", NodeWrite, WriteResult, "write"),
        Method("node_state", NodeState, StateName, "read"),
        Method("bulk_load", BulkLoad, int, "write"),
        Method("schema", NoArgs, SchemaInfo, "read"),
        Method("define_assoc", DefineAssoc, AssocType, "admin"),
        Method("define_object", DefineObject, ObjectType, "admin"),
        Method("define_index", DefineIndex, IndexStatus, "admin"),
        Method("drop_index", IndexName, None, "admin"),
        Method("indexes", NoArgs, list[IndexStatus], "read"),
        Method("index_status", IndexName, IndexStatus, "read"),
        Method("index_query", IndexQuery, IndexPage, "read"),
        Method("index_check", IndexCheckArgs, IndexCheck, "admin"),
        Method("index_build", IndexBuild, IndexStatus, "admin"),
        Method("index_repair_recent", IndexName, IndexCheck, "admin"),
        Method("queue_stats", NoArgs, QueueStats, "admin"),
        Method("queue_jobs", QueueJobs, list[JobInfo], "admin"),
        Method("queue_job", ObjId, JobInfo | None, "admin"),
        Method("queue_retry", NoArgs, int, "admin"),
        Method("queue_reinject", QueueReinject, int, "admin"),
        Method("drain", Drain, bool, "admin"),
        Method("check_counts", CheckCounts, list[CountMismatch], "admin"),
        Method("check_inverses", CheckCounts, list[HangingEdge], "admin"),
        Method("cache_stats", NoArgs, CacheStats | None, "admin"),
        Method("hot_keys", HotKeys, list[HotKey], "admin"),
        Method("post", Post, WriteResult, "write"),
        Method("post_delete", PostDelete, WriteResult, "write"),
        Method("home_timeline", HomeTimeline, Page[TimelineItem], "read"),
        Method("user_timeline", UserTimeline, Page[TimelineItem], "read"),
        Method("timeline_config", NoArgs, TimelineConfig | None, "read"),
        Method("define_timeline", DefineTimeline, TimelineConfig, "admin"),
        Method("changes", Changes, ChangePage, "read"),
        Method("feed_commit", FeedCommit, None, "read"),
        Method("enable_feed", NoArgs, None, "admin"),
        Method("obj_restore", ObjId, Deletion, "write"),
        # `Graph.deletions`' methods (`api.deletions`), as `deletions_<name>`:
        Method("deletions_all", NoArgs, list[Deletion], "admin"),
        Method("deletions_of_object", ObjId, Deletion, "admin"),
        Method("deletions_purge", NoArgs, list[Deletion], "admin"),
        Method("deletions_wait", Drain, bool, "admin"),
        Method("deletions_dangling", CheckCounts, DanglingReport, "admin"),
    ]
}

#: Writes a batch may run (`Graph.batch()`'s): they go through the pipeline together,
#: one journal fsync and one transaction per touched shard for all of them.
BATCH_WRITES = frozenset(
    {
        *("assoc_add", "assoc_delete", "assoc_archive", "assoc_negate", "assoc_change_type"),
        *("obj_add", "obj_update", "obj_delete"),
    }
)
#: Methods a batch may run: every read but the feed's (a long poll), and the writes above.
BATCHABLE = (
    frozenset(name for name, m in METHODS.items() if m.scope == "read") - {"changes", "feed_commit"}
) | BATCH_WRITES


class BatchItem(msgspec.Struct, forbid_unknown_fields=True):
    method: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)


class Batch(msgspec.Struct, forbid_unknown_fields=True):
    requests: list[BatchItem]


# -- errors ----------------------------------------------------------------------------


class ErrorBody(msgspec.Struct):
    code: str
    message: str
    details: dict[str, Any] = msgspec.field(default_factory=dict)


class ErrorEnvelope(msgspec.Struct):
    error: ErrorBody


#: HTTP status per error class; the most specific class listed wins.
STATUS: dict[type[AssocdbError], int] = {
    _errors.DataTooLarge: 413,
    _errors.InvalidRequest: 400,
    _errors.Unauthenticated: 401,
    _errors.PermissionDenied: 403,
    _errors.NotFound: 404,
    _errors.Conflict: 409,
    _errors.FeedExpired: 410,
    _errors.Unavailable: 503,
    AssocdbError: 500,
}

#: Error classes by their `code`, for the client to raise what the server raised.
BY_CODE: dict[str, type[AssocdbError]] = {
    cls.code: cls
    for cls in vars(_errors).values()
    # The class that names a code, not a subclass that shares it (KeyTaken is a Conflict).
    if isinstance(cls, type) and issubclass(cls, AssocdbError) and "code" in vars(cls)
}


def status_of(exc: AssocdbError) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def error_body(exc: AssocdbError) -> bytes:
    details = {
        k: v if isinstance(v, (int, float, str, bool)) else str(v) for k, v in exc.details.items()
    }
    return msgspec.json.encode(ErrorEnvelope(ErrorBody(exc.code, exc.message, details)))


def error_from(body: ErrorBody) -> AssocdbError:
    """The exception a server's error body stands for."""
    kind = BY_CODE.get(body.code, AssocdbError)
    return kind(body.message, **body.details)
