"""Run `assocdb serve-thrift` as a real process on a free port, and a FlockDB client for it."""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from assocdb.flock.server import idl
from tests.support.http_server import free_port


class ThriftServer:
    """A running `assocdb serve-thrift` process."""

    def __init__(self, directory: Path, *extra: str, port: int | None = None) -> None:
        self.port = free_port() if port is None else port
        command = [sys.executable, "-c", "from assocdb.cli.main import main; main()"]
        self.log = directory.parent / f"serve-thrift-{self.port}-{time.monotonic_ns()}.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [*command, "serve-thrift", str(directory), "--port", str(self.port), *extra],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        self._wait()

    def _wait(self) -> None:
        """Until this process says it serves and the port accepts a connection (30 s
        only turn a hang into a failure)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve-thrift exited: {self.log.read_text()}")
            if b"serving " in self.log.read_bytes():
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                    return
                except OSError:
                    pass
            time.sleep(0.02)
        raise RuntimeError("serve-thrift did not start within 30 s")

    def client(self) -> Any:
        """A thriftpy2 client of the same Flockdb.thrift: framed transport, binary protocol."""
        from thriftpy2.protocol import TBinaryProtocolFactory
        from thriftpy2.rpc import make_client
        from thriftpy2.transport import TFramedTransportFactory

        return make_client(
            idl().FlockDB,
            "127.0.0.1",
            self.port,
            proto_factory=TBinaryProtocolFactory(),
            trans_factory=TFramedTransportFactory(),
            timeout=30_000,
        )

    def stop(self) -> int | None:
        """SIGTERM (SIGKILL after 10 s); the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def pack(ids: list[int]) -> bytes:
    return struct.pack(f"<{len(ids)}q", *ids)


def unpack(packed: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(packed) // 8}q", packed))


class Flock:
    """FlockDB's client verbs (its `Select`/`Execute` helpers) over a thriftpy2 client."""

    def __init__(self, client: Any, m: ModuleType | None = None) -> None:
        self.c = client
        self.m = m or idl()

    def term(
        self,
        source: int,
        graph: int = 1,
        forward: bool = True,
        ids: list[int] | None = None,
        states: list[int] | None = None,
    ) -> Any:
        return self.m.QueryTerm(source, graph, forward, None if ids is None else pack(ids), states)

    def execute(
        self,
        op: int,
        term: Any,
        position: int | None = None,
        priority: int = 3,
        at: int | None = None,
    ) -> None:
        self.executes([(op, term, position)], priority, at)

    def executes(
        self, ops: list[tuple[int, Any, int | None]], priority: int = 3, at: int | None = None
    ) -> None:
        operations = [self.m.ExecuteOperation(op, term, pos) for op, term, pos in ops]
        self.c.execute(self.m.ExecuteOperations(operations, at, priority))

    def simple(self, term: Any) -> list[Any]:
        return [self.m.SelectOperation(1, term)]

    def op(self, kind: int) -> Any:
        return self.m.SelectOperation(kind, None)

    def select(
        self, program: list[Any], count: int, cursor: int = -1
    ) -> tuple[list[int], int, int]:
        r = self.c.select(program, self.m.Page(count, cursor))
        return unpack(r.ids), r.next_cursor, r.prev_cursor

    def count(self, program: list[Any]) -> int:
        n: int = self.c.count(program)
        return n

    def everything(self, program: list[Any], count: int) -> list[int]:
        """Every id, following next_cursor."""
        found, cursor = [], -1
        while True:
            ids, cursor, _ = self.select(program, count, cursor)
            found += ids
            if cursor == 0:
                return found
