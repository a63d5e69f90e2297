"""Applying bulk batches on several processes at once.

SQLite writes about one shard file per core, and Python's sqlite3 module holds
the GIL between rows, so threads do not help; processes do. A ShardWriter
takes rounds of per-shard row batches and applies each batch with the
backend's `bulk_merge` (the merge rule and counts of any write, one
transaction, sized for a load) in worker processes, each with its own
connections. Each shard belongs to one worker (`shard % workers`), so
workers never contend for a file. The caller prepares the next round while
the workers apply this one; one round at most is in flight, which bounds
memory.

Workers are plain `python -m assocdb.writes.bulkworker` subprocesses, told how to open
the backend by its `spec()`, and fed length-prefixed msgpack frames on stdin:
`[[shard, rows], …]` in (one frame per round), a list of
`[error class, message]` back on stdout (empty when all went well). (The
multiprocessing module would re-import the caller's `__main__`, which breaks
scripts without a main guard; a library should not impose that.)
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from typing import IO, Any

import msgspec

from ..core import errors as _errors
from ..core.errors import AssocdbError, Unavailable
from ..core.merge import EdgeTuple
from ..storage.backend import Backend

HEADER = struct.Struct(">I")
_encode = msgspec.msgpack.encode
SPEC_VARIABLE = "ASSOCDB_BULK_WORKER_SPEC"  # the backend's spec, for the worker to open


class ShardWriter:
    """Applies rounds of `{shard: rows}`, in-process or on worker processes."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._workers: list[subprocess.Popen[bytes]] = []
        self._in_flight = False  # a round was sent and not yet answered

    def start_workers(self, workers: int) -> None:
        """Apply later rounds on `workers` processes (starting now, in the background)."""
        if self._workers or workers < 2:
            return
        # In the environment, not argv: a MySQL spec holds the password, and a
        # command line is visible to every user of the machine.
        env = {**os.environ, SPEC_VARIABLE: msgspec.json.encode(self._backend.spec()).decode()}
        # A session of their own: a terminal's Ctrl-C (SIGINT to its foreground process
        # group) reaches the caller only, which stops the load; each worker finishes its
        # round and exits at the end of its input, instead of printing a traceback.
        self._workers = [
            subprocess.Popen(
                [sys.executable, "-m", "assocdb.writes.bulkworker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
            for _ in range(workers)
        ]

    def write(self, batch: dict[int, list[EdgeTuple]]) -> None:
        """Apply one round; returns once it is under way (on workers) or done."""
        self.wait()
        if not self._workers:
            for shard, rows in sorted(batch.items()):
                self._backend.bulk_merge(shard, rows)
            return
        # One frame per worker per round: the worker reads it whole before it
        # starts applying, so this returns while the workers are still busy.
        frames: list[list[tuple[int, list[EdgeTuple]]]] = [[] for _ in self._workers]
        for shard, rows in batch.items():
            frames[shard % len(frames)].append((shard, rows))
        for worker, frame in zip(self._workers, frames, strict=True):
            assert worker.stdin is not None
            try:
                send(worker.stdin, frame)
            except OSError:
                raise Unavailable("a bulk-load worker process exited") from None
        self._in_flight = True

    def wait(self) -> None:
        """Wait for the round in flight; re-raise the first error it met."""
        if not self._in_flight:
            return
        self._in_flight = False
        errors = []
        for worker in self._workers:
            assert worker.stdout is not None
            errors += receive(worker.stdout)
        if errors:
            raise _error(errors[0])

    def close(self) -> None:
        try:
            self.wait()
        finally:
            for worker in self._workers:
                if worker.stdin is not None:
                    worker.stdin.close()
            for worker in self._workers:
                worker.wait()
                if worker.stdout is not None:
                    worker.stdout.close()
            self._workers = []


def send(stream: IO[bytes], message: object) -> None:
    body = _encode(message)
    stream.write(HEADER.pack(len(body)))
    stream.write(body)
    stream.flush()


def receive(stream: IO[bytes]) -> Any:
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        raise Unavailable("a bulk-load worker process exited")
    return msgspec.msgpack.decode(stream.read(HEADER.unpack(header)[0]))


def _error(answer: list[str]) -> AssocdbError:
    kind = getattr(_errors, answer[0], AssocdbError)
    if not (isinstance(kind, type) and issubclass(kind, AssocdbError)):
        kind = AssocdbError
    return kind(answer[1])
