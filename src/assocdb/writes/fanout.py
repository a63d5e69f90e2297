"""Fan-out on write: the background job that delivers one timeline entry to every follower.

A post by an account with a million followers must not block its writer, so
`post` journals a `FanoutJob` and returns. The job pages through the author's
followers list (`(author, followed_by)`, newest first, FANOUT_PAGE at a time),
groups each page's followers by shard and merges the entry into their home
timelines with one transaction per shard (`Backend.merge_timelines`). Like a
node job it records where it got to in the journal after each page, so a
restart or a failed shard resumes from the last page, not from the start;
redoing a page is harmless because the timeline merge is idempotent.

A post is delivered to current followers (normal edges). A delete is
delivered to everyone who ever followed (every state, removed edges
included), so an account that unfollowed between the post and its delete
does not keep the item should it follow again.

A post without a time does not read the author's shard (so a shard that is
down queues the post rather than failing it): the job carries `posts`, and
takes the entry's time from the stored post edge once that is applied.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import msgspec

from ..core import cursor as _cursor
from ..core.errors import Unavailable
from ..core.ids import shard_of
from ..core.merge import State
from ..core.ops import RowKey
from ..core.scans import EdgeScan
from ..core.timeline_list import TimelineEntry
from ..storage.backend import Backend

FANOUT_PAGE = 2000  # followers per page
BY_ID2 = -1  # `at[0]` of a job that reads every state at once, in id2 order


class FanoutJob(msgspec.Struct, tag="fanout", array_like=True, frozen=True):
    """Merge `entry` into the home timeline of each follower of `author`.

    `followers` is the type id of the author's followers list; `states` the
    follower edge states delivered to; `at` is `(state index, time, id2)` of
    the last follower done, or `(BY_ID2, 0, id2)` for a job of several states,
    which reads them all at once in id2 order. With `posts` (the posts type id), the entry's time
    is not known yet: it is the stored post edge's (`timed`).
    """

    author: int
    followers: int
    states: list[int]
    entry: TimelineEntry
    cap: int
    at: tuple[int, int, int] | None = None
    posts: int | None = None

    keys: ClassVar[list[RowKey]] = []  # writes only timelines, which no resolved write reads

    @property
    def updated_at(self) -> int:
        return self.entry[3] // 2


class Deliveries(msgspec.Struct, tag="deliver", array_like=True, frozen=True):
    """Merge `entry` into the home timelines of `owners`: one page of a FanoutJob.

    A job of its own, with one leg per shard, so a shard that is down delays
    only its own followers' deliveries (retried from the error queue) while
    the fan-out goes on to the next page.
    """

    owners: list[int]
    entry: TimelineEntry
    cap: int

    keys: ClassVar[list[RowKey]] = []

    def legs(self, shards: int) -> list[tuple[int, dict[int, list[TimelineEntry]]]]:
        """(shard, {owner: [entry]}) per shard, in shard order (leg numbers are stable)."""
        by_shard: dict[int, dict[int, list[TimelineEntry]]] = {}
        for owner in self.owners:
            by_shard.setdefault(shard_of(owner, shards), {})[owner] = [self.entry]
        return sorted(by_shard.items())


def timed(backend: Backend, job: FanoutJob) -> FanoutJob | None:
    """The job with its entry's time, taken from the author's post edge once the post
    (or a later write of it) is applied; Unavailable until then; None if a later
    write removed the post (nothing to deliver)."""
    if job.posts is None:
        return job
    _, item, author, stamp = job.entry
    rows = backend.edges(shard_of(author, backend.shards), author, job.posts, [item])
    if not rows or rows[0].updated_at < job.updated_at:
        raise Unavailable(f"waiting for the post of item {item} to be applied to deliver it")
    if rows[0].state == State.REMOVED:
        return None
    return msgspec.structs.replace(job, entry=(rows[0].time, item, author, stamp), posts=None)


def fanout_page(
    backend: Backend,
    job: FanoutJob,
    page: int | None = None,
    deliver: Callable[[Deliveries], object] | None = None,
) -> FanoutJob | None:
    """Deliver the next page of followers; the job as it stands after, or None when done.

    `deliver` runs the page's `Deliveries` (the applier journals it as a job of
    its own); by default they are merged here, every shard or an error.
    """
    timed_job = timed(backend, job)
    if timed_job is None:
        return None
    job = timed_job
    index, boundary = 0, None
    if job.at is not None:
        index, time, id2 = job.at
        boundary = (time, id2)
    shard = shard_of(job.author, backend.shards)
    size = FANOUT_PAGE if page is None else page
    if len(job.states) > 1 and (job.at is None or index == BY_ID2):
        # Every state in one statement, in id2 order: a follower whose edge
        # changes state meanwhile (a re-follow during a delete's fan-out) is
        # in exactly one state in the statement's snapshot, and keeps its id2
        # across pages, so it is never missed between two scans.
        after = None if job.at is None else job.at[2]
        followers = backend.scan_id2(
            shard, job.author, job.followers, job.states, after, True, size
        )
        if not followers:
            return None
        _deliver(backend, Deliveries([row[0] for row in followers], job.entry, job.cap), deliver)
        return msgspec.structs.replace(job, at=(BY_ID2, 0, followers[-1][0]))
    while index < len(job.states):  # one state; or a job journaled before BY_ID2
        seek = _cursor.START if boundary is None else _cursor.Seek(True, boundary, False)
        rows = backend.scan(
            shard, EdgeScan(job.author, job.followers, job.states[index], seek, size)
        )
        if rows:
            _deliver(backend, Deliveries([row[0] for row in rows], job.entry, job.cap), deliver)
            return msgspec.structs.replace(job, at=(index, rows[-1][1], rows[-1][0]))
        index, boundary = index + 1, None
    return None


def _deliver(
    backend: Backend, deliveries: Deliveries, deliver: Callable[[Deliveries], object] | None
) -> None:
    if deliver is None:
        for shard_number, writes in deliveries.legs(backend.shards):
            backend.merge_timelines(shard_number, writes, deliveries.cap)
    else:
        deliver(deliveries)
