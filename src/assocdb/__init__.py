"""assocdb: a data store for huge social graphs.

Objects and associations (follows, friends, likes), adjacency lists with
millions of entries, exact counts and cursor paging, on SQLite shards in one
directory, with no server.

>>> import assocdb
>>> g = assocdb.open("data/")
>>> g.define_assoc("follows", inverse="followed_by")
>>> g.assoc_add(1, "follows", 2)
>>> g.assoc_page(2, "followed_by").items

The engine (`Graph`, `open`, `RetryPolicy`) and the client (`Client`, `Batch`)
are loaded on first use (PEP 562 `__getattr__`, as httpx does), so that
`import assocdb.client` loads no engine module: only the errors, records and
schema types of `core/` are imported here.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

from .core.deletion import DanglingEdge, DanglingReport, Deletion, Orphan
from .core.errors import (
    AssocdbError,
    Conflict,
    DataTooLarge,
    FeedExpired,
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
    Change,
    ChangePage,
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

if _typing.TYPE_CHECKING:
    from .api.backup import backup
    from .api.backup import verify as verify_backup
    from .api.graph import Graph
    from .api.open import open_graph as open
    from .api.restore import restore_backup as restore
    from .client.batch import Batch
    from .client.client import Client
    from .writes.health import RetryPolicy

__version__ = "0.1.0"

__all__ = [
    "STATES",
    "Assoc",
    "AssocType",
    "AssocdbError",
    "Batch",
    "CacheConfig",
    "CacheStats",
    "Change",
    "ChangePage",
    "Client",
    "Conflict",
    "Count",
    "CountMismatch",
    "DanglingEdge",
    "DanglingReport",
    "DataTooLarge",
    "Deferred",
    "Deletion",
    "FeedExpired",
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
    "Orphan",
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
    "backup",
    "open",
    "restore",
    "verify_backup",
]

#: The names loaded on first use: name → (module, attribute).
_LAZY = {
    "Batch": (".client.batch", "Batch"),
    "Client": (".client.client", "Client"),
    "Graph": (".api.graph", "Graph"),
    "RetryPolicy": (".writes.health", "RetryPolicy"),
    "backup": (".api.backup", "backup"),
    "open": (".api.open", "open_graph"),
    "restore": (".api.restore", "restore_backup"),
    "verify_backup": (".api.backup", "verify"),
}


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = getattr(_importlib.import_module(module, __name__), attribute)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
