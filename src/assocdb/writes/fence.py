"""The durability fence: a journal job is deleted only once the shard writes that
applied it are on the disk.

Shards commit without waiting for the disk (SQLite's synchronous=NORMAL): a
power loss may take back a transaction a crash would not. So a job stays in
the journal, where a replay finds it, until the shards it wrote are synced
(`Backend.make_durable`): one fsync per shard for every job applied since the
last fence, run by the retrier a few times a second and when many jobs wait.
The retrier fences once the oldest waiting job has waited FENCE_SECONDS (the
first job to wait wakes it: `applied` says so), and the pipeline when many
jobs wait. Losing the fence only costs the redundant replay of applied jobs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from ..core.errors import AssocdbError
from ..storage.backend import Backend
from .journal import Journal

log = logging.getLogger("assocdb.journal")
#: How long applied jobs wait for their shards' fsync, at most… A fence fsyncs every
#: shard written since the last (all 16, under random writes), on the disk the
#: journal's fsync (the writers' one wait) needs too: at 0.2 s, 8 writers one write
#: at a time ran ~5% slower (5 of 5 A/B rounds) and spent ~10% more CPU per write
#: than at 1.0 s. Longer only costs a replay after a power loss more redundant work.
FENCE_SECONDS = 1.0
FENCE_JOBS = 5000  # …or until this many wait


class Fence:
    """Holds applied jobs until their shards are synced, then completes them."""

    def __init__(self, backend: Backend, journal: Journal) -> None:
        self.backend = backend
        self.journal = journal
        self._unfenced: list[int] = []
        self._unfenced_shards: set[int] = set()
        #: When the oldest applied job still waiting for a fence was applied (monotonic).
        self._unfenced_since: float | None = None
        self._lock = threading.Lock()
        #: Held while a fence runs: when a fence returns, earlier ones are done.
        self.running = threading.Lock()

    def applied(self, jobs: list[int], shards: set[int]) -> bool:
        """These jobs are applied on `shards`: complete them at the next fence. True if
        they are the first to wait (the retrier may sleep longer than a fence may wait:
        the caller wakes it)."""
        with self._lock:
            first = self._unfenced_since is None
            if first:
                self._unfenced_since = time.monotonic()
            self._unfenced.extend(jobs)
            self._unfenced_shards.update(shards)
        return first

    def fence(self) -> None:
        """Make the shard transactions of applied jobs durable, then let the journal
        delete those jobs."""
        with self.running:
            with self._lock:
                jobs, self._unfenced = self._unfenced, []
                shards, self._unfenced_shards = self._unfenced_shards, set()
                since, self._unfenced_since = self._unfenced_since, None
            if not jobs and not shards:
                return
            try:
                self.backend.make_durable(sorted(shards))
            except BaseException:
                with self._lock:
                    self._unfenced[:0] = jobs
                    self._unfenced_shards |= shards
                    waiting = [t for t in (since, self._unfenced_since) if t is not None]
                    self._unfenced_since = min(waiting, default=time.monotonic())
                raise
            self.journal.complete(jobs)

    def unfenced(self) -> int:
        """How many applied jobs wait for the next fence."""
        return len(self._unfenced)

    def wait(self) -> float | None:
        """Seconds until the oldest unfenced job has waited FENCE_SECONDS (0.0: it has);
        None when no job waits for a fence."""
        since = self._unfenced_since
        if since is None:
            return None
        return max(0.0, since + FENCE_SECONDS - time.monotonic())

    def durable(self, shards: Sequence[int]) -> bool:
        """Make the shards of a failed job's applied legs durable before the journal
        records those legs as done (a retry skips done legs): without this, a power
        loss could take them back. False if that failed: the retry redoes them."""
        if not shards:
            return True
        try:
            self.backend.make_durable(sorted(set(shards)))
        except AssocdbError:
            log.warning("shards %s could not be synced; their legs will be redone", shards)
            return False
        return True
