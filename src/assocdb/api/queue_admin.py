"""The write journal's operator surface: stats, errors, bad jobs, retry, reinject."""

from __future__ import annotations

import time
from collections.abc import Iterable
from contextlib import suppress
from typing import Any

import msgspec

from ..core.errors import AssocdbError, InvalidRequest
from ..core.ids import MAX_INT64, check_id
from ..core.merge import EdgeTuple, ObjRow, user_data
from ..core.ops import Rows
from ..core.records import STATE_NAMES, JobInfo, JobState, QueueStats
from ..writes.applier import Work, decode
from ..writes.journal import Holder, Job
from .engine import Engine

MAX_DRAIN = 86_400.0  # seconds: a day is longer than any drain should take


class QueueAdmin:
    """queue_stats, queue_jobs, queue_job, queue_retry, queue_reinject, drain (`Graph`
    documents each)."""

    def __init__(self, engine: Engine) -> None:
        self._journal = engine.journal
        self._applier = engine.applier

    def _settle(self) -> None:
        """Write recorded completions and failures, syncing applied jobs' shards first
        (`Applier.fence`), so the journal's counts say what is still to do."""
        with suppress(AssocdbError):  # if not now, the retrier does it shortly
            self._applier.fence()
        self._journal.flush()

    def queue_stats(self) -> QueueStats:
        self._settle()
        counts = self._journal.counts()
        stats = self._applier.stats
        return QueueStats(
            depth=counts["new"] + counts["error"] + counts["running"],
            new=counts["new"],
            errors=counts["error"],
            bad=counts["bad"],
            running=counts["running"],
            applied=stats.applied,
            failed_attempts=stats.failed,
            retries=stats.retries,
            apply_p50_ms=round(stats.percentile(0.50) * 1000, 3),
            apply_p99_ms=round(stats.percentile(0.99) * 1000, 3),
            down_shards=self._applier.health.down(),
            held=[_info(job, holder) for job, holder in self._journal.held()],
        )

    def queue_jobs(
        self, state: JobState = "error", *, after: int = 0, limit: int = 100
    ) -> list[JobInfo]:
        if type(limit) is not int or not 0 < limit <= 10_000:
            raise InvalidRequest(f"limit must be an integer from 1 to 10,000, got {limit!r}")
        if type(after) is not int or not 0 <= after <= MAX_INT64:
            raise InvalidRequest(f"after must be a job id (0 or more), got {after!r}")
        self._settle()
        return [_info(job) for job in self._journal.jobs(state, after, limit)]

    def queue_job(self, id: int) -> JobInfo | None:
        self._settle()
        job = self._journal.get(check_id(id, "job id"))
        return None if job is None else _info(job)

    def queue_retry(self) -> int:
        count = self._journal.retry_now()
        self._applier.wake()
        return count

    def queue_reinject(self, ids: Iterable[int] | None = None) -> int:
        chosen = None if ids is None else [check_id(i, "job id") for i in ids]
        count = self._journal.reinject(chosen)
        self._applier.wake()
        return count

    def drain(self, timeout: float | None = None) -> bool:
        check_drain_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._applier.idle():
                self._settle()
                counts = self._journal.counts()
                if counts["new"] + counts["error"] + counts["running"] == 0:
                    return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


def check_drain_timeout(timeout: object) -> None:
    """Raise InvalidRequest unless `timeout` is None or 0 … MAX_DRAIN seconds."""
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0 <= timeout <= MAX_DRAIN
    ):
        raise InvalidRequest(
            f"timeout must be a number of seconds from 0 to {MAX_DRAIN:,.0f}, got {timeout!r}"
        )


def _info(job: Job, holder: Holder | None = None) -> JobInfo:
    return JobInfo(
        job.id,
        job.state,
        job.attempts,
        job.retries,
        job.next_at,
        job.created_at,
        job.error,
        describe(decode(job.body)),
        held_by=None if holder is None else _held_by(holder),
        held_since=None if holder is None else job.claimed_at,
    )


def _held_by(holder: Holder) -> str:
    """Who works on a job, for people: "pid 4242 on web-1", "(exited)" if it died."""
    return f"pid {holder.pid} on {holder.host}" + ("" if holder.alive else " (exited)")


def describe(work: Work) -> dict[str, Any]:
    """A job's operation as plain JSON-able data, for people."""
    if isinstance(work, Rows):
        return {
            "kind": "rows",
            "edges": [_edge(row) for row in work.edges],
            "objects": [_object(row) for row in work.objects],
            "nodes": [
                {
                    "node": n.node,
                    "atype": n.atype,
                    "state": STATE_NAMES[n.state],
                    "updated_at": n.updated_at,
                }
                for n in work.nodes
            ],
        }
    fields = msgspec.structs.asdict(work)
    for key in ("data", "patch"):
        if isinstance(fields.get(key), bytes):
            fields[key] = msgspec.json.decode(fields[key])
    if "state" in fields:
        fields["state"] = STATE_NAMES[fields["state"]]
    return {"kind": type(work).__name__, **fields}


def _edge(row: EdgeTuple) -> dict[str, Any]:
    id1, atype, id2, state, time_, updated_at, _ = row
    data = user_data(row)
    return {
        "id1": id1,
        "atype": atype,
        "id2": id2,
        "state": STATE_NAMES[state],
        "time": time_,
        "updated_at": updated_at,
        "data": None if data is None else msgspec.json.decode(data),
    }


def _object(row: ObjRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "otype": row.otype,
        "state": STATE_NAMES[row.state],
        "version": row.version,
        "updated_at": row.updated_at,
        "data": msgspec.json.decode(row.data),
    }
