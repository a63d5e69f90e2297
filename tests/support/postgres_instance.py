"""A PostgreSQL server of a test's own: its data directory and port, to stop and kill.

`PrivatePostgres(port).start()` runs `initdb` (once) and `pg_ctl start` as
the `postgres` user when the test runs as root (PostgreSQL refuses root),
listening on 127.0.0.1 only with trust authentication. `signal` sends a
signal to the postmaster and every server process under it (SIGSTOP on the
postmaster alone would leave its backends answering); `start` after a
SIGKILL is a restart with crash recovery.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path


def binaries() -> Path | None:
    """The directory of initdb and pg_ctl, or None if PostgreSQL is not installed."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return versions[-1].parent if versions else None


class PrivatePostgres:
    def __init__(self, port: int, root: Path = Path("/tmp/assocdb-postgres")) -> None:
        self.port = port
        self.dir = root / str(port)
        self.data = self.dir / "data"
        bin_dir = binaries()
        assert bin_dir is not None, "PostgreSQL is not installed"
        self.bin = bin_dir
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def _as_owner(self, *command: str) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *command]
        return list(command)

    def _run(self, *command: str, timeout: float = 120) -> None:
        subprocess.run(self._as_owner(*command), check=True, capture_output=True, timeout=timeout)

    def start(self) -> None:
        self._forget_dead_postmaster()
        self.dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        if not (self.data / "PG_VERSION").exists():
            self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust",
                      "-U", "postgres", "--no-sync")  # fmt: skip
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
            "-c shared_buffers=16MB -c max_connections=60 -c fsync=on"
        )
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "log"),
                  "-o", options, "-w", "-t", "60", "start")  # fmt: skip

    def stop(self) -> None:
        self.signal(signal.SIGCONT)
        stop = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"]
        subprocess.run(
            self._as_owner(*stop),
            check=False,
            capture_output=True,
            timeout=60,
        )

    def pids(self) -> list[int]:
        """The postmaster's pid and its children's."""
        try:
            postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == postmaster:  # the parent pid
                children.append(int(stat.parent.name))
        return [postmaster, *children]

    def running(self) -> bool:
        """Whether any of the server's processes still runs."""
        return any(_alive(pid) for pid in self.pids())

    def signal(self, number: int) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, number)

    def _forget_dead_postmaster(self) -> None:
        """After a SIGKILL: wait for the server's processes to die, and remove the pid
        file of a postmaster that is dead but not yet reaped (a zombie would pass
        for a running server)."""
        pids = self.pids()
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pids and not _alive(pids[0]):
            (self.data / "postmaster.pid").unlink(missing_ok=True)
            (self.dir / f".s.PGSQL.{self.port}.lock").unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
