"""A bulk-load worker process: `python -m assocdb.writes.bulkworker`, the backend spec in
$ASSOCDB_BULK_WORKER_SPEC; it forks one more worker per pair of pipes in
$ASSOCDB_BULK_WORKER_FDS (see `writes.workers`)."""

from __future__ import annotations

import os
import sys
from array import array
from typing import Any

import msgspec

from ..core.bulkrows import PackedRows
from ..core.errors import AssocdbError
from ..storage.registry import open_backend
from .workers import FDS_VARIABLE, HEADER, SPEC_VARIABLE, send

_Row = tuple[int, int, int, int, int, int, bytes | None]
_round = msgspec.msgpack.Decoder(list[tuple[int, int, bytes, list[_Row]]])  # `workers.Frame`


def _serve(spec: dict[str, Any]) -> None:
    """A worker: apply each round read from stdin, answer with its errors on stdout."""
    backend = open_backend(spec)
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    packed = getattr(backend, "packed_rows", False)  # (`SQLiteBackend`: its fast path)
    while len(header := source.read(HEADER.size)) == HEADER.size:
        size = HEADER.unpack(header)[0]
        body = source.read(size)
        if len(body) < size:  # the caller stopped mid-round (Ctrl-C): nothing to apply
            break
        errors = []
        for shard, updated_at, packed, others in _round.decode(body):
            rows = PackedRows(array("q", packed), updated_at, others)
            try:
                backend.bulk_merge(shard, rows if packed else rows.rows())
            except AssocdbError as exc:
                errors.append([type(exc).__name__, exc.message])
            except Exception as exc:  # report it, don't die: the parent decides
                errors.append(["AssocdbError", f"{type(exc).__name__}: {exc}"])
        send(sink, errors)
    backend.close()


def _main() -> None:
    """Fork a worker per pair of pipes given, each on its own pipes as its stdin and
    stdout, then serve on this process's own; wait for the forked ones to end."""
    spec = msgspec.json.decode(os.environ[SPEC_VARIABLE])
    given = os.environ.get(FDS_VARIABLE, "")
    pairs = [tuple(map(int, pair.split(","))) for pair in given.split(";") if pair]
    forked = []
    for own in pairs:
        pid = os.fork()  # nothing opened yet: no thread, no connection, no buffered input
        if pid == 0:
            code = 1
            try:
                os.dup2(own[0], 0)
                os.dup2(own[1], 1)
                for fd in {fd for pair in pairs for fd in pair}:
                    os.close(fd)  # (another worker's pipe held open would hide its exit)
                _serve(spec)
                code = 0
            finally:
                sys.stdout.flush()
                os._exit(code)
        forked.append(pid)
    for fd in {fd for pair in pairs for fd in pair}:
        os.close(fd)
    try:
        _serve(spec)
    finally:
        for pid in forked:
            os.waitpid(pid, 0)


if __name__ == "__main__":
    _main()
