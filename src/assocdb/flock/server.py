"""The Thrift server: `Flockdb.thrift`, framed transport, binary protocol (thriftpy2).

One thread per connection, as FlockDB's clients keep a few long-lived
connections each. The listening socket sets SO_REUSEPORT (thriftpy2 does),
so several `assocdb serve-thrift` processes can listen on one port and the
kernel spreads connections over them: the service keeps nothing between
calls (cursors are positions and ids), so any process answers any call.

A frame may declare at most `MAX_FRAME` bytes: thriftpy2 would buffer (and
allocate, three times over) whatever a 4-byte header declares, up to 2 GiB per
connection, for anyone who can connect. A longer frame closes its connection
before its body is read, as Thrift's Java server does (its limit is ~16 MB).
"""

from __future__ import annotations

import logging
import struct
import threading
from importlib import resources
from types import ModuleType
from typing import Any

from ..api.graph import Graph
from ..core.extras import needs, require
from .graphs import GraphTable
from .service import FlockService

PORT = 7915  # FlockDB's
MAX_FRAME = 16 << 20  # bytes of one request frame
log = logging.getLogger("assocdb.flock")
_FEATURE = "FlockDB's Thrift interface (assocdb serve-thrift)"
_lock = threading.Lock()
_idl: ModuleType | None = None


def idl() -> ModuleType:
    """`Flockdb.thrift`, loaded by thriftpy2 (once): the service and its structs."""
    global _idl
    with _lock:
        if _idl is None:
            thriftpy2 = require("thriftpy2", "thrift", _FEATURE)
            with resources.as_file(resources.files(__package__) / "Flockdb.thrift") as path:
                _idl = thriftpy2.load(str(path), module_name="flockdb_thrift")
        return _idl


def make_server(graph: Graph, graphs: GraphTable, host: str, port: int) -> Any:
    """A thriftpy2 server of `graph` on `host:port`, not yet serving (call `.serve()`)."""
    with needs("thrift", _FEATURE):
        from thriftpy2.protocol import TBinaryProtocolFactory
        from thriftpy2.server import TThreadedServer
        from thriftpy2.thrift import TProcessor
        from thriftpy2.transport import TFramedTransport, TFramedTransportFactory, TServerSocket
    service = idl()
    processor = TProcessor(service.FlockDB, FlockService(graph, graphs, service))
    # No client timeout: FlockDB's clients keep idle connections open.
    sock = TServerSocket(host=host, port=port, client_timeout=None)  # type: ignore[no-untyped-call]
    return TThreadedServer(
        processor,
        sock,
        iprot_factory=TBinaryProtocolFactory(),  # type: ignore[no-untyped-call]
        itrans_factory=_LimitedFrames(TFramedTransport, MAX_FRAME),
        otrans_factory=TFramedTransportFactory(),
        daemon=True,  # open connections do not keep a stopping process alive
    )


def listening_port(server: Any) -> int:
    """The port a server listens on once `.trans.listen()` ran (for port 0)."""
    port: int = server.trans.sock.getsockname()[1]
    return port


class _LimitedFrames:
    """A transport factory: thriftpy2's framed transport (its fast one) over the
    client's socket as seen through `_FrameLimit`."""

    def __init__(self, framed: Any, limit: int) -> None:
        self._framed = framed
        self._limit = limit

    def get_transport(self, client: Any) -> Any:
        return self._framed(_FrameLimit(client, self._limit))


class _FrameLimit:
    """A client's socket that follows the frames passing through it and ends the
    connection (TTransportException, which the server takes as a closed connection)
    at a frame header declaring more than `limit` bytes, before its body is read."""

    def __init__(self, trans: Any, limit: int) -> None:
        self._trans = trans
        self._limit = limit
        self._left = 0  # bytes of the current frame's body still to come
        self._header = b""  # the next frame header's bytes read so far

    def read(self, size: int) -> bytes:
        data: bytes = self._trans.read(size)
        at = 0
        while at < len(data):
            if self._left:
                step = min(self._left, len(data) - at)
                self._left -= step
                at += step
                continue
            need = 4 - len(self._header)
            self._header += data[at : at + need]
            at += need
            if len(self._header) == 4:
                (declared,) = struct.unpack("!i", self._header)
                self._header = b""
                if declared > self._limit:
                    self._refuse(declared)
                self._left = max(declared, 0)
        return data

    def _refuse(self, declared: int) -> None:
        from thriftpy2.transport import TTransportException

        log.warning(
            "closing a connection whose frame declares %d bytes (the limit is %d)",
            declared,
            self._limit,
        )
        self._trans.close()
        raise TTransportException(
            TTransportException.UNKNOWN, f"a frame of {declared} bytes is over {self._limit}"
        )

    def write(self, data: bytes) -> None:
        self._trans.write(data)

    def flush(self) -> None:
        self._trans.flush()

    def is_open(self) -> bool:
        return bool(self._trans.is_open())

    def open(self) -> None:
        self._trans.open()

    def close(self) -> None:
        self._trans.close()
