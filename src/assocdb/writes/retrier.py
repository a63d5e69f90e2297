"""The applier's threads: background applies of queued jobs, and the retrier.

`async_threads` threads take whatever jobs are queued (`enqueue`) as one batch
and apply it; one retrier thread claims due jobs of the error queue, runs the
fence when the oldest applied job has waited FENCE_SECONDS, and flushes the
journal, a few times a second or at once when woken.
Both run jobs through the `Runner` (the `Applier`): the same code path as
every other attempt.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from contextlib import suppress
from typing import Protocol

from ..core.errors import AssocdbError, Unavailable
from ..core.ops import Rows
from .fence import FENCE_JOBS, Fence
from .health import RetryPolicy
from .journal import Journal
from .work import Work, decode

log = logging.getLogger("assocdb.journal")
ASYNC_BATCH = 1000  # queued jobs a background thread applies together


class Runner(Protocol):
    def run(
        self,
        job: int,
        work: Work,
        done: int = 0,
        attempts: int = 0,
        retries: int = 0,
        *,
        lock_refused: list[Unavailable] | None = None,
    ) -> bool: ...

    def run_batch(self, jobs: list[tuple[int, Rows]]) -> list[bool]: ...


class Background:
    """Applies queued jobs and retries failed ones, on threads of its own."""

    def __init__(self, runner: Runner, journal: Journal, policy: RetryPolicy, fence: Fence) -> None:
        self.runner = runner
        self.journal = journal
        self.policy = policy
        self.fence = fence
        self.queue: queue.Queue[tuple[int, Work] | None] = queue.Queue()
        self.woken = threading.Event()
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self._busy = 0
        self._busy_lock = threading.Lock()

    def start(self, async_threads: int = 1) -> None:
        """Start the retrier and `async_threads` threads applying queued jobs."""
        self.threads = [
            threading.Thread(target=self._retry_loop, name="assocdb-retrier", daemon=True)
        ]
        self.threads += [
            threading.Thread(target=self._async_loop, name=f"assocdb-apply-{n}", daemon=True)
            for n in range(async_threads)
        ]
        for thread in self.threads:
            thread.start()

    def enqueue(self, job: int, work: Work) -> None:
        """Apply `job` in the background (the journal already holds it)."""
        with self._busy_lock:
            self._busy += 1
        self.queue.put((job, work))

    def idle(self) -> bool:
        """True when no background apply is waiting or running."""
        return self._busy == 0

    def wake(self) -> None:
        self.woken.set()

    def _async_loop(self) -> None:
        """Apply queued jobs, taking whatever is waiting as one batch."""
        while (item := self.queue.get()) is not None:
            items = [item]
            while len(items) < ASYNC_BATCH:
                try:
                    more = self.queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self.queue.put(None)  # this thread's stop: after the batch
                    break
                items.append(more)
            try:
                self._run_queued(items)
            except Exception:  # the journal still holds them; the next open replays them
                log.exception("applying jobs %d… failed unexpectedly", items[0][0])
            finally:
                with self._busy_lock:
                    self._busy -= len(items)

    def _run_queued(self, items: list[tuple[int, Work]]) -> None:
        """Concrete rows together (`run_batch`), then the rest one by one, in journal order."""
        rows = [(job, work) for job, work in items if isinstance(work, Rows)]
        if rows:
            self.runner.run_batch(rows)
        refused: list[Unavailable] = []
        for job, work in items:
            if not isinstance(work, Rows):
                self.runner.run(job, work, lock_refused=refused)
        if self.fence.unfenced() >= FENCE_JOBS:
            self.fence.fence()

    def _retry_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                self._retry_due()
                if self.fence.wait() == 0.0:
                    self.fence.fence()
                self.journal.flush()
                pause = self._pause()
            except Exception:
                log.exception("the retrier met an error; trying again shortly")
                pause = 1.0
            self.woken.wait(pause)
            self.woken.clear()

    def _retry_due(self) -> None:
        while not self.stopping.is_set():
            if self.retry_round() < 100:
                return

    def retry_round(self) -> int:
        """Claim up to 100 due jobs and run them; how many there were."""
        jobs = self.journal.claim_due(time.time(), 100, self.policy.claim_hold)
        refused: list[Unavailable] = []  # a round waits for a stuck writer lock once
        for job in jobs:
            work = decode(job.body)
            self.runner.run(
                job.id, work, job.done, job.attempts, job.retries + 1, lock_refused=refused
            )
        return len(jobs)

    def _pause(self) -> float:
        """How long the retrier may sleep: until the next due retry or the next fence
        (a write that leaves the first job waiting for a fence wakes it to ask again)."""
        due = self.journal.next_due()
        pause = 1.0 if due is None else max(0.005, min(1.0, due - time.time()))
        fence = self.fence.wait()
        return pause if fence is None else max(0.005, min(pause, fence))

    def stop(self, drain: float = 5.0) -> None:
        """Stop the threads, first giving queued background applies `drain` seconds."""
        deadline = time.monotonic() + drain
        while not self.idle() and time.monotonic() < deadline:
            time.sleep(0.005)
        self.stopping.set()
        self.woken.set()
        for _ in self.threads[1:]:
            self.queue.put(None)
        for thread in self.threads:
            thread.join(timeout=max(0.1, deadline - time.monotonic()))
        with suppress(AssocdbError):  # if not now, the jobs are replayed on the next open
            self.fence.fence()
