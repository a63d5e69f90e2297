"""Which processes working on journal jobs are alive: a lock the kernel drops.

Each open journal is an *owner*, named by a token `host:pid:random` (the
random part tells a reused pid from the process that had it before). The
owner holds an exclusive `flock` on its file `.<journal>.owner.<token>` beside
the journal while the journal is open (a file, not a folder of them, so that
copying a graph directory's files copies nothing that fails; a copied lock
file is not locked: its owner is dead there). Whoever wants to know whether an owner is alive
tries that lock without waiting: taken by someone, the owner lives; free (or
the file gone), the owner died, whatever way it died, since the kernel drops
a process's locks when it ends. The file is published under its name only
once locked (a rename), so a free lock never means "not locked yet".

flock locks belong to an open file description: a second open of the file,
in this process or another, conflicts with the owner's lock, so the check is
right inside the owner's own process too. A forked child shares the parent's
description, and keeps the owner alive until both have ended. On a network
file system flock may be local to a host; owners of another host are taken
to be alive (their claims wait out their hold).
"""

from __future__ import annotations

import fcntl
import os
import secrets
import socket
from contextlib import suppress
from pathlib import Path

UNLOCKED = "-unlocked"  # the token's end when its owner could not make its lock


def parse_owner(owner: str) -> tuple[str, int, str]:
    """An owner token's host, pid and random part (the token itself as host if malformed)."""
    parts = owner.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit():
        return parts[0], int(parts[1]), parts[2]
    return owner, 0, ""


class Owners:
    """This journal's owner lock, and the liveness of the others."""

    def __init__(self, journal: Path, *, enabled: bool = True) -> None:
        self._host = socket.gethostname()
        #: This process's (this journal's) name on the jobs it works on.
        self.owner = f"{self._host}:{os.getpid()}:{secrets.token_hex(6)}"
        self._dir: Path | None = None
        self._fd: int | None = None
        if not enabled or str(journal) == ":memory:":
            return
        self._dir = journal.parent
        self._prefix = f".{journal.name}.owner."
        try:
            self._fd = self._lock()
        except OSError:  # no lock to show: other processes wait out this one's holds
            self.owner += UNLOCKED
            return
        self._sweep()

    def _lock(self) -> int:
        """Create, lock, then publish this owner's file; its descriptor."""
        assert self._dir is not None
        making = self._dir / f"{self._prefix}{self.owner}.new"
        fd = os.open(making, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.replace(making, self._file(self.owner))
        return fd

    def _file(self, owner: str) -> Path:
        assert self._dir is not None
        return self._dir / f"{self._prefix}{owner}"

    def alive(self, owner: str) -> bool:
        """Whether `owner` may still work on its jobs (False: it died; its lock file is removed)."""
        if owner == self.owner:
            return True
        host, _, _ = parse_owner(owner)
        if self._dir is None or host != self._host or owner.endswith(UNLOCKED):
            return True  # cannot tell: its claims wait out their hold
        return not _free(self._file(owner))

    def _sweep(self) -> None:
        """Remove the files of owners that died (and half-made ones), so they do not pile up."""
        assert self._dir is not None
        with suppress(OSError):
            for path in self._dir.iterdir():
                if path.name.startswith(self._prefix) and self.owner not in path.name:
                    _free(path)

    def close(self) -> None:
        """Drop this owner's lock and file: from now on it is dead to every other process."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with suppress(OSError):
            os.unlink(self._file(self.owner))
        os.close(fd)


def _free(path: Path) -> bool:
    """Whether nobody holds the lock on `path`; if so (or it is gone), it is removed."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    except OSError:
        return False  # cannot open it (permissions): take it to be alive
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held (EWOULDBLOCK), or no locks here: take it to be alive
        return False
    else:
        with suppress(OSError):
            os.unlink(path)  # while locked: its owner cannot be using it
        return True
    finally:
        os.close(fd)
