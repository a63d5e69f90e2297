"""A bulk-load worker process: `python -m assocdb.writes.bulkworker`, the backend spec in
$ASSOCDB_BULK_WORKER_SPEC (see `writes.workers`)."""

from __future__ import annotations

import os
import sys
from typing import Any

import msgspec

from ..core.errors import AssocdbError
from ..storage.registry import open_backend
from .workers import HEADER, SPEC_VARIABLE, send

_Row = tuple[int, int, int, int, int, int, bytes | None]
_round = msgspec.msgpack.Decoder(list[tuple[int, list[_Row]]])


def _serve(spec: dict[str, Any]) -> None:
    """A worker: apply each round read from stdin, answer with its errors on stdout."""
    backend = open_backend(spec)
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    while len(header := source.read(HEADER.size)) == HEADER.size:
        size = HEADER.unpack(header)[0]
        body = source.read(size)
        if len(body) < size:  # the caller stopped mid-round (Ctrl-C): nothing to apply
            break
        errors = []
        for shard, rows in _round.decode(body):
            try:
                backend.bulk_merge(shard, rows)
            except AssocdbError as exc:
                errors.append([type(exc).__name__, exc.message])
            except Exception as exc:  # report it, don't die: the parent decides
                errors.append(["AssocdbError", f"{type(exc).__name__}: {exc}"])
        send(sink, errors)
    backend.close()


if __name__ == "__main__":
    _serve(msgspec.json.decode(os.environ[SPEC_VARIABLE]))
