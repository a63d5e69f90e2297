"""The lock that makes a write's resolve → journal → apply atomic across processes.

An object patch (or a type change) is resolved against the row as read, then
applied. Within one process the pipeline does that one batch at a time and
`writes.pending.Pending` orders it after unapplied earlier writes; but two processes
writing one SQLite directory (`serve --workers N`, a script beside a server)
could both read the object before either applied: the later stamp would then
overwrite the other's patch, which had been acknowledged as applied. So a
process holds this lock from the read to the apply of such writes
(`applier.exclusive` says which): an `flock` on a file in the directory
(other processes, and other open graphs in this one, wait), and a thread lock
within the graph (flock does not exclude threads sharing a file).

Reentrant in the thread that holds it. A process that dies holding it lets
it go (the kernel drops its flock). One that stops holding it (SIGSTOP, a
debugger) would make the others wait for ever: a wait gives up after
`timeout` seconds with Unavailable, so the write is refused, not hung (a
batch holds the lock for milliseconds; seconds mean its holder is stuck).
"""

from __future__ import annotations

import fcntl
import math
import os
import threading
import time
from pathlib import Path
from types import TracebackType

from ..core.errors import Unavailable


class WriterLock:
    """Held by one thread of one process at a time (see the module doc)."""

    def __init__(self, path: Path, timeout: float = math.inf) -> None:
        self.path = path
        self.timeout = timeout
        self._threads = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    def __enter__(self) -> None:
        deadline = time.monotonic() + self.timeout
        if not self._threads.acquire(timeout=-1 if self.timeout == math.inf else self.timeout):
            raise self._stuck("another thread of this process")
        if self._depth == 0:
            try:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                self._flock(self._fd, deadline)
            except BaseException as exc:  # (Ctrl-C while another process holds it)
                self._threads.release()
                if isinstance(exc, OSError):
                    raise Unavailable(f"cannot lock {self.path} for writing: {exc}") from exc
                raise
        self._depth += 1

    def _flock(self, fd: int, deadline: float) -> None:
        """Take the flock, waiting until `deadline` at most: polled, since a blocking
        flock cannot give up (a waiter wakes within a millisecond of its release)."""
        if self.timeout == math.inf:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return
        pause = 0.0001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._stuck("another writer of this graph (a stopped process?)") from None
                time.sleep(min(pause, left))
                pause = min(pause * 2, 0.001)

    def _stuck(self, holder: str) -> Unavailable:
        return Unavailable(
            f"{holder} has held the writer lock {self.path} for over {self.timeout:g} s; "
            "the write was not made: try again"
        )

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._depth -= 1
        try:
            if self._depth == 0 and self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._threads.release()

    def close(self) -> None:
        with self._threads:
            if self._fd is not None:
                os.close(self._fd)  # (releases the flock, were it held)
                self._fd = None
