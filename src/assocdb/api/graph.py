"""Graph: the whole assocdb API over one backend and one write journal.

The API is assembled from one module per concern, all sharing GraphCore
(lifecycle, schema, the write path):

* `_objects.py`       obj_add, obj_get, obj_update, obj_delete
* `_assoc_writes.py`  assoc_add, assoc_delete, assoc_change_type, bulk_load
* `_assoc_reads.py`   assoc_get, assoc_count, assoc_range, assoc_time_range, assoc_page
* `_nodes.py`         node_archive, node_unarchive, node_negate, node_remove, node_state
* `_query_exec.py`    select (set arithmetic: `_query.py`)
* `_queue_admin.py`   queue_stats, queue_jobs, queue_job, queue_retry, queue_reinject, drain
* `_checks.py`        check_inverses (check_counts: `_core.py`)
* `_timelines.py`     define_timeline, post, post_delete, home_timeline, user_timeline
* `_indexes.py`       define_index, drop_index, index_query, index_status, indexes
* `_cleaner.py`       index_build, index_repair_recent, index_check, start_cleaner
"""

from __future__ import annotations

from ..core.clock import HybridClock
from ..core.pagers import Pagers
from ..core.records import CacheConfig
from ..storage.backend import Backend
from ..writes.applier import RetryPolicy
from ..writes.journal import Journal
from .assoc_reads import AssocReadsAPI
from .assoc_writes import AssocWritesAPI
from .checks import ChecksAPI
from .cleaner import CleanerAPI
from .nodes import NodesAPI
from .objects import ObjectsAPI, _IdBlocks
from .queries import QueryAPI
from .queue_admin import QueueAdminAPI
from .timelines import TimelinesAPI


class Graph(
    ObjectsAPI,
    AssocWritesAPI,
    TimelinesAPI,  # before AssocReadsAPI: it builds on its cached reads
    AssocReadsAPI,
    NodesAPI,
    QueryAPI,
    QueueAdminAPI,
    ChecksAPI,
    CleanerAPI,  # and IndexesAPI, its base: define_index, index_query …
    Pagers,
):
    """A graph of objects and associations. Thread-safe; open one per process.

    >>> g = assocdb.open("data/")
    >>> g.define_assoc("follows", inverse="followed_by")
    >>> g.assoc_add(1, "follows", 2)
    WriteResult(status='applied', updated_at=...)
    """

    def __init__(
        self,
        backend: Backend,
        journal: Journal,
        *,
        sync: bool = True,
        retry: RetryPolicy | None = None,
        clock: HybridClock | None = None,
        cache: CacheConfig | None = None,
    ) -> None:
        self._ids = _IdBlocks(backend)
        super().__init__(backend, journal, sync=sync, retry=retry, clock=clock, cache=cache)

    def __enter__(self) -> Graph:
        return self
