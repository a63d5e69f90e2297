"""The rows this process's journaled, not yet applied jobs will write (`Pending`)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ..core.ops import RowKey
from .claims import Claims


class Pending:
    """The stored rows (and node states of lists) that this process's journaled, not
    yet applied jobs will write.

    A write that depends on the stored row (a re-add keeping the edge's time,
    an object patch) is resolved only once every earlier job that writes the
    same row has been applied; otherwise it would be resolved against a state
    that an earlier, still queued write is about to change. (Jobs of other
    processes sharing the journal are not tracked: across processes, a queued
    write is seen once it is applied.) The unique index entries they will
    write are in `claims`, released with them.
    """

    def __init__(self) -> None:
        self.claims = Claims()
        self._jobs: dict[RowKey, set[int]] = {}
        self._keys: dict[int, list[RowKey]] = {}
        #: The pending jobs journaled unresolved (operations): how they change their
        #: rows, and which unique keys they take or free, is known once resolved.
        self._unresolved: set[int] = set()
        self._lock = threading.Lock()

    def add(self, job: int, keys: list[RowKey], unresolved: bool = False) -> None:
        self.add_many([job], [keys], [unresolved])

    def add_many(
        self,
        jobs: Sequence[int],
        keys: Sequence[list[RowKey]],
        unresolved: Sequence[bool] | None = None,
    ) -> None:
        with self._lock:
            for job, its_keys in zip(jobs, keys, strict=True):
                self._keys[job] = its_keys
                for key in its_keys:
                    self._jobs.setdefault(key, set()).add(job)
            if unresolved is not None:
                self._unresolved.update(j for j, no in zip(jobs, unresolved, strict=True) if no)

    def resolved(self, job: int) -> None:
        """The pending job `job` is resolved (its unique keys are claimed)."""
        if self._unresolved:
            with self._lock:
                self._unresolved.discard(job)

    def unresolved(self, key: RowKey) -> bool:
        """Whether a pending job journaled unresolved writes `key`."""
        if not self._unresolved:
            return False
        with self._lock:
            return any(job in self._unresolved for job in self._jobs.get(key, ()))

    def discard(self, job: int, *, keep_claims: bool = False) -> None:
        self.discard_many([job], keep_claims=keep_claims)

    def discard_many(self, jobs: Sequence[int], *, keep_claims: bool = False) -> None:
        """Later writes of these jobs' rows need not wait for them; their unique index
        claims are released too, unless `keep_claims` (their entries are not stored)."""
        with self._lock:
            for job in jobs:
                self._unresolved.discard(job)
                for key in self._keys.pop(job, ()):
                    waiting = self._jobs.get(key)
                    if waiting is not None:
                        waiting.discard(job)
                        if not waiting:
                            del self._jobs[key]
        if not keep_claims:
            self.claims.release(jobs)

    def waiting(self) -> bool:
        """Whether any pending job writes a row (a read without the lock: a job added
        meanwhile is one journaled after the caller's writes)."""
        return bool(self._jobs)

    def which_blocked(self, keys: Sequence[list[RowKey]]) -> list[bool]:
        """For each list of keys: whether a pending job writes one of them."""
        if not self._jobs:
            return [False] * len(keys)
        with self._lock:
            jobs = self._jobs
            return [any(key in jobs for key in its_keys) for its_keys in keys]

    def blocked(self, keys: list[RowKey], before: int | None = None) -> bool:
        """True if a pending job (older than job `before`, if given) writes one of `keys`."""
        with self._lock:
            for key in keys:
                for job in self._jobs.get(key, ()):
                    if before is None or job < before:
                        return True
        return False

    def __len__(self) -> int:
        return len(self._keys)
