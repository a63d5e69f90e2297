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
the backend by its `spec()`: one is started, and once it has imported what a
worker needs it forks the others (before it opens anything: no thread, no
connection to share), each handed its own pair of pipes by the caller
(`FDS_VARIABLE`), so a load pays for one interpreter start and one import
(~0.4 s of CPU each). Each is fed length-prefixed msgpack frames on its input:
`[[shard, updated_at, packed, rows with data], …]` in (one frame per round; a
shard's rows without data as the bytes of their int64 array, `PackedRows`), a list of
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
from ..core.bulkrows import PackedRows
from ..core.errors import AssocdbError, Unavailable
from ..core.merge import EdgeTuple
from ..storage.backend import Backend

HEADER = struct.Struct(">I")
_encode = msgspec.msgpack.encode
SPEC_VARIABLE = "ASSOCDB_BULK_WORKER_SPEC"  # the backend's spec, for the worker to open
#: The pipes of the workers the first one forks: "in,out;in,out…" (its own descriptors).
FDS_VARIABLE = "ASSOCDB_BULK_WORKER_FDS"
#: A shard's rows in a round's frame: (shard, updated_at, the packed rows' int64s as
#: bytes, the rows with data) (`core.bulkrows.PackedRows`).
Frame = tuple[int, int, bytes, list[EdgeTuple]]


class ShardWriter:
    """Applies rounds of `{shard: rows}`, in-process or on worker processes."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._workers: list[subprocess.Popen[bytes]] = []  # the one started (it forks the rest)
        self._pipes: list[tuple[IO[bytes], IO[bytes]]] = []  # each worker's (input, output)
        self._in_flight = False  # a round was sent and not yet answered

    def start_workers(self, workers: int) -> None:
        """Apply later rounds on `workers` processes (starting now, in the background)."""
        if self._workers or workers < 2:
            return
        # The forked workers' pipes: (their input, our end), (our end, their output).
        pairs = [(os.pipe(), os.pipe()) for _ in range(workers - 1)]
        theirs = [(given[0], taken[1]) for given, taken in pairs]
        # In the environment, not argv: a MySQL spec holds the password, and a
        # command line is visible to every user of the machine.
        env = {
            **os.environ,
            SPEC_VARIABLE: msgspec.json.encode(self._backend.spec()).decode(),
            FDS_VARIABLE: ";".join(f"{r},{w}" for r, w in theirs),
        }
        # A session of their own: a terminal's Ctrl-C (SIGINT to its foreground process
        # group) reaches the caller only, which stops the load; each worker finishes its
        # round and exits at the end of its input, instead of printing a traceback.
        try:
            first = subprocess.Popen(
                [sys.executable, "-m", "assocdb.writes.bulkworker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                start_new_session=True,
                pass_fds=[fd for pair in theirs for fd in pair],
            )
        finally:
            for fd in (fd for pair in theirs for fd in pair):
                os.close(fd)  # (the workers' ends: their exit is then our end of file)
        assert first.stdin is not None
        assert first.stdout is not None
        self._workers = [first]
        self._pipes = [(first.stdin, first.stdout)] + [
            (os.fdopen(given[1], "wb"), os.fdopen(taken[0], "rb")) for given, taken in pairs
        ]

    def write(self, batch: dict[int, PackedRows]) -> None:
        """Apply one round; returns once it is under way (on workers) or done."""
        self.wait()
        if not self._pipes:
            backend = self._backend
            packed = getattr(backend, "packed_rows", False)  # (`SQLiteBackend`: its fast path)
            for shard, rows in sorted(batch.items()):
                backend.bulk_merge(shard, rows if packed else rows.rows())
            return
        # One frame per worker per round: the worker reads it whole before it
        # starts applying, so this returns while the workers are still busy.
        frames: list[list[Frame]] = [[] for _ in self._pipes]
        for shard, rows in batch.items():
            part = (shard, rows.updated_at, rows.packed.tobytes(), rows.others)
            frames[shard % len(frames)].append(part)
        for (stream, _), frame in zip(self._pipes, frames, strict=True):
            try:
                send(stream, frame)
            except OSError:
                raise Unavailable("a bulk-load worker process exited") from None
        self._in_flight = True

    def wait(self) -> None:
        """Wait for the round in flight; re-raise the first error it met."""
        if not self._in_flight:
            return
        self._in_flight = False
        errors = []
        for _, answers in self._pipes:
            errors += receive(answers)
        if errors:
            raise _error(errors[0])

    def close(self) -> None:
        try:
            self.wait()
        finally:
            for stream, _ in self._pipes:
                stream.close()  # the end of its input: the worker exits
            for worker in self._workers:
                worker.wait()  # (the first waits for the ones it forked)
            for _, answers in self._pipes:
                answers.close()
            self._workers, self._pipes = [], []


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
