"""assocdb: a data store for huge social graphs.

Objects and associations (follows, friends, likes), adjacency lists with
millions of entries, exact counts and cursor paging, on SQLite shards in one
directory, with no server.

>>> import assocdb
>>> g = assocdb.open("data/")
>>> g.define_assoc("follows", inverse="followed_by")
>>> g.assoc_add(1, "follows", 2)
>>> g.assoc_page(2, "followed_by").items
"""

from __future__ import annotations

from .api.graph import Graph
from .api.open import open_graph as open
from .client.client import Batch, Client
from .core.errors import (
    AssocdbError,
    Conflict,
    DataTooLarge,
    InvalidCursor,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    SchemaError,
    Timeout,
    Unauthenticated,
    Unavailable,
    UnknownType,
)
from .core.query import Query
from .core.records import STATE_NAMES as STATES
from .core.records import (
    Assoc,
    CacheConfig,
    CacheStats,
    Count,
    CountMismatch,
    Deferred,
    HangingEdge,
    HotKey,
    IndexCheck,
    IndexPage,
    IndexStatus,
    JobInfo,
    Obj,
    Page,
    QueueStats,
    TimelineConfig,
    TimelineItem,
    WriteResult,
)
from .core.schema import AssocType, ObjectType, Schema
from .writes.applier import RetryPolicy

__version__ = "0.1.0"

__all__ = [
    "STATES",
    "Assoc",
    "AssocType",
    "AssocdbError",
    "Batch",
    "CacheConfig",
    "CacheStats",
    "Client",
    "Conflict",
    "Count",
    "CountMismatch",
    "DataTooLarge",
    "Deferred",
    "Graph",
    "HangingEdge",
    "HotKey",
    "IndexCheck",
    "IndexPage",
    "IndexStatus",
    "InvalidCursor",
    "InvalidRequest",
    "JobInfo",
    "NotFound",
    "Obj",
    "ObjectType",
    "Page",
    "PermissionDenied",
    "Query",
    "QueueStats",
    "RetryPolicy",
    "Schema",
    "SchemaError",
    "TimelineConfig",
    "TimelineItem",
    "Timeout",
    "Unauthenticated",
    "Unavailable",
    "UnknownType",
    "WriteResult",
    "open",
]
