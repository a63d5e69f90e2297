"""The Thrift server: `Flockdb.thrift`, framed transport, binary protocol (thriftpy2).

One thread per connection, as FlockDB's clients keep a few long-lived
connections each. The listening socket sets SO_REUSEPORT (thriftpy2 does),
so several `assocdb serve-thrift` processes can listen on one port and the
kernel spreads connections over them: the service keeps nothing between
calls (cursors are positions and ids), so any process answers any call.

Request frames are checked (`frames.py`) before thriftpy2 decodes them.
"""

from __future__ import annotations

import threading
from importlib import resources
from types import ModuleType
from typing import Any

from ..api.graph import Graph
from ..core.extras import needs, require
from .frames import CheckedFrames
from .graphs import GraphTable
from .service import FlockService

PORT = 7915  # FlockDB's
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
        itrans_factory=CheckedFrames(TFramedTransport),
        otrans_factory=TFramedTransportFactory(),
        daemon=True,  # open connections do not keep a stopping process alive
    )


def listening_port(server: Any) -> int:
    """The port a server listens on once `.trans.listen()` ran (for port 0)."""
    port: int = server.trans.sock.getsockname()[1]
    return port
