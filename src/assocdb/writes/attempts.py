"""How an attempt at a job ended: told to the journal and counted.

An `Attempt` is the record of one try at a job: which legs were already done,
how many counted attempts and retries came before, when it started. `Outcomes`
turns a failed attempt into the journal's `Failure` (with its backoff, and a
bad job once it has failed `RetryPolicy.max_attempts` times for reasons other
than availability, or at once when rejected) and counts every attempt in
`ApplyStats`, which the metrics read.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ..core.errors import AssocdbError, Unavailable
from ..core.ops import is_rejection
from .health import RetryPolicy
from .journal import Failure, Journal
from .pending import Pending

log = logging.getLogger("assocdb.journal")


@dataclass(frozen=True, slots=True)
class Attempt:
    """One try at journal job `job`: its legs already `done` (a bit per leg), the
    counted `attempts` and the `retries` before it, and when it `start`ed."""

    job: int
    done: int = 0
    attempts: int = 0
    retries: int = 0
    start: float = field(default_factory=time.perf_counter)

    def seconds(self) -> float:
        return time.perf_counter() - self.start


class ApplyStats:
    """Counters the metrics layer reads."""

    def __init__(self) -> None:
        self.applied = 0
        self.failed = 0
        self.retries = 0
        self.bad = 0
        self.latencies: deque[float] = deque(maxlen=2048)
        self.lock = threading.Lock()

    def record(self, seconds: float, ok: bool, retry: bool, bad: bool) -> None:
        with self.lock:
            self.latencies.append(seconds)
            self.applied += ok
            self.failed += not ok
            self.retries += retry
            self.bad += bad

    def record_applied(self, seconds: float, count: int) -> None:
        """`record` for `count` first attempts that all succeeded in `seconds` (a batch)."""
        with self.lock:
            self.latencies.extend([seconds] * count)
            self.applied += count

    def percentile(self, q: float) -> float:
        with self.lock:
            ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


class Outcomes:
    """Records how attempts ended: counted in `stats`, failures in the journal."""

    def __init__(
        self,
        journal: Journal,
        policy: RetryPolicy,
        pending: Pending,
        wake: Callable[[], None],
    ) -> None:
        self.journal = journal
        self.policy = policy
        self.pending = pending
        self.stats = ApplyStats()
        self._wake = wake  # the retrier: failures are due soon
        self._random = random.Random()

    def succeeded(self, attempt: Attempt) -> bool:
        self.stats.record(attempt.seconds(), ok=True, retry=attempt.retries > 0, bad=False)
        return True

    def failed(
        self, attempt: Attempt, errors: list[BaseException], done: int | None = None
    ) -> bool:
        """Record the failed attempt (its legs `done` now, if not as it started); False."""
        if done is not None:
            attempt = Attempt(attempt.job, done, attempt.attempts, attempt.retries, attempt.start)
        self.record([self.failure(attempt, errors)])
        return False

    def record(self, failures: list[Failure]) -> None:
        """Record failed attempts in the journal, for the retrier.

        If the journal cannot write them now (a full disk), it keeps them and
        writes them with its next commit (the retrier flushes a few times a
        second): the attempts ended all the same, and their jobs are journaled.
        Raising here would tell writers whose writes the journal holds that they
        were refused, and leave the rest of a batch unanswered.
        """
        try:
            self.journal.fail(failures)
        except AssocdbError as exc:
            log.warning("%d failed attempts are recorded later: %s", len(failures), exc)
        self._wake()

    def failure(self, attempt: Attempt, errors: list[BaseException], own: bool = True) -> Failure:
        """How the attempt ended, for the journal; counted, and logged if the job is now
        bad (at once if rejected, unless the errors may be another job's: not `own`)."""
        counts = any(not isinstance(e, Unavailable) for e in errors)
        rejected = own and any(is_rejection(e) for e in errors)
        bad = rejected or (counts and attempt.attempts + 1 >= self.policy.max_attempts)
        message = "; ".join(f"{type(e).__name__}: {e}" for e in errors)
        next_at = time.time() + self.policy.delay(attempt.retries, self._random)
        self.stats.record(attempt.seconds(), ok=False, retry=attempt.retries > 0, bad=bad)
        if bad:
            self.pending.discard(attempt.job)  # parked: later writes no longer wait for it
            log.error("job %d is now a bad job: %s", attempt.job, message)
        return Failure(attempt.job, attempt.done, message, counts, next_at, bad)
