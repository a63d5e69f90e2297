"""Whether other processes wrote a SQLite graph: the signal that lets tier 1 keep
entries for as long as no one else writes (issue 43).

A cache's write-through keeps its entries right against this process's writes;
another process writing the same directory changes rows behind its back. Without
a signal, an entry may only be trusted for a bounded time (`CacheConfig.max_age`).
With this one, an entry stays until another process has written.

The file `.changes` in the graph directory holds SLOTS counters of 8 bytes, one
per open backend (any process), shared through `mmap`. A backend claims the first
slot it can lock (an open-file-description lock on the slot's bytes, which the
kernel drops when the process dies, and which two backends of one process do not
share), and after each of its write transactions ends, stores a new value in its
slot (`bump`: numbers unique within the backend, so a racing store can never put
back the value another process saw). `foreign()` says whether any other slot
changed since the last call: a reader that checks after another process's commit
sees it. A process that finds no slot free, or a platform without such locks,
gets no signal (`open_signal` returns None) and the cache ages entries instead.
"""

from __future__ import annotations

import fcntl
import itertools
import mmap
import os
import struct
import threading
from pathlib import Path

FILE = ".changes"
SLOTS = 256
_SLOT = 8
_SIZE = SLOTS * _SLOT
_COUNTER = struct.Struct("<Q")
# struct flock on Linux (x86_64, aarch64): l_type, l_whence, l_start, l_len, l_pid, padding.
_FLOCK = struct.Struct("hhqqi4x")
_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None)


class ChangeSignal:
    """One backend's slot in the graph's `.changes` file (see the module doc)."""

    def __init__(self, fd: int, slot: int) -> None:
        self._fd = fd
        self._map = mmap.mmap(fd, _SIZE)
        self.slot = slot
        self._start, self._end = slot * _SLOT, (slot + 1) * _SLOT
        self._numbers = itertools.count(_COUNTER.unpack_from(self._map, self._start)[0] + 1)
        self._lock = threading.Lock()
        self._seen = self._others()

    def bump(self) -> None:
        """This backend's write transaction ended (committed or not): tell the others."""
        # (ValueError: closed; a write racing close has no reader here left to tell.
        # A try, not `suppress`: this runs after every write transaction.)
        try:  # noqa: SIM105
            _COUNTER.pack_into(self._map, self._start, next(self._numbers) % 2**64)
        except ValueError:
            pass

    def foreign(self) -> bool:
        """Whether another backend ended a write since the last call (or since opening)."""
        with self._lock:
            try:
                now = self._others()
            except ValueError:  # closed
                return False
            changed = now != self._seen
            self._seen = now
            return changed

    def _others(self) -> bytes:
        view = self._map
        return view[: self._start] + view[self._end :]

    def close(self) -> None:
        """Give the slot back (closing twice is harmless)."""
        with self._lock:
            fd, self._fd = self._fd, -1
            if fd < 0:
                return
            try:
                self._map.close()
            finally:
                os.close(fd)  # (and with it the slot's lock)


def open_signal(root: Path) -> ChangeSignal | None:
    """The backend's slot in `root`'s signal file, or None if it cannot have one (no
    open-file-description locks here, a read-only directory, all slots taken)."""
    if _OFD_SETLK is None:
        return None
    try:
        fd = os.open(root / FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_size < _SIZE:
            os.ftruncate(fd, _SIZE)  # (zeros; two processes doing it at once agree)
        for slot in range(SLOTS):
            if _lock_slot(fd, slot):
                return ChangeSignal(fd, slot)
    except OSError:
        pass
    os.close(fd)
    return None


def _lock_slot(fd: int, slot: int) -> bool:
    request = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, slot * _SLOT, _SLOT, 0)
    try:
        fcntl.fcntl(fd, _OFD_SETLK, request)  # type: ignore[arg-type]
    except OSError:
        return False  # another backend holds it
    return True
