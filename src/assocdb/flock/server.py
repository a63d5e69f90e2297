"""The Thrift server: `Flockdb.thrift`, framed transport, binary protocol (thriftpy2).

One thread per connection, as FlockDB's clients keep a few long-lived
connections each; at most `MAX_CONNECTIONS` at once (one more is closed as
soon as it is accepted: a client can try another server at once, where a
queued one would wait on a server that is full), each closed after
`IDLE_TIMEOUT` seconds without a request or `FRAME_TIMEOUT` seconds within one
(see `frames.py`), so neither many idle connections nor slow ones can take
every thread and socket of the process. The listening socket sets SO_REUSEPORT (thriftpy2 does),
so several `assocdb serve-thrift` processes can listen on one port and the
kernel spreads connections over them: the service keeps nothing between
calls (cursors are positions and ids), so any process answers any call.

Request frames are checked (`frames.py`) before thriftpy2 decodes them.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from importlib import resources
from types import ModuleType
from typing import Any

from ..api.graph import Graph
from ..core.extras import needs, require
from .frames import CheckedFrames
from .graphs import GraphTable
from .service import FlockService

PORT = 7915  # FlockDB's
MAX_CONNECTIONS = 512  # open at once, a thread each
IDLE_TIMEOUT = 600.0  # seconds a connection may wait for its next request (Finagle reconnects)
FRAME_TIMEOUT = 30.0  # seconds for a request frame to arrive once begun, or an answer to go
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


def make_server(
    graph: Graph,
    graphs: GraphTable,
    host: str,
    port: int,
    max_connections: int = MAX_CONNECTIONS,
    idle_timeout: float | None = IDLE_TIMEOUT,
    frame_timeout: float | None = FRAME_TIMEOUT,
) -> Any:
    """A thriftpy2 server of `graph` on `host:port`, not yet serving (call `.serve()`):
    at most `max_connections` open at once; a timeout of None is no limit."""
    with needs("thrift", _FEATURE):
        from thriftpy2.protocol import TBinaryProtocolFactory
        from thriftpy2.server import TThreadedServer
        from thriftpy2.thrift import TProcessor
        from thriftpy2.transport import TFramedTransport, TFramedTransportFactory, TServerSocket
    service = idl()
    processor = TProcessor(service.FlockDB, FlockService(graph, graphs, service))
    # The timeouts are the transport's (frames.py): one per connection's state.
    sock = TServerSocket(host=host, port=port, client_timeout=None)  # type: ignore[no-untyped-call]

    class Server(TThreadedServer):
        """thriftpy2's thread per connection, at most `max_connections` threads."""

        slots = threading.BoundedSemaphore(max_connections)
        refused = 0
        told = -math.inf  # when the log last said connections are refused

        def serve(self) -> None:
            self.trans.listen()  # type: ignore[no-untyped-call]
            while not self.closed:
                try:
                    client = self.trans.accept()  # type: ignore[no-untyped-call]
                except OSError as exc:  # out of descriptors, say: go on with the others
                    log.warning("accepting a FlockDB connection failed: %s", exc)
                    continue
                if not self.slots.acquire(blocking=False):
                    self._refuse(client)
                    continue
                thread = threading.Thread(target=self._handle, args=(client,), daemon=True)
                try:
                    thread.start()
                except RuntimeError as exc:  # no thread to be had
                    log.warning("serving a FlockDB connection failed: %s", exc)
                    client.close()
                    self.slots.release()

        def _handle(self, client: Any) -> None:
            try:
                self.handle(client)
            finally:
                client.close()
                self.slots.release()

        def _refuse(self, client: Any) -> None:
            client.close()
            self.refused += 1
            now = time.monotonic()
            if now - self.told >= 10:  # a flood of them logs a line per 10 s
                self.told = now
                log.warning(
                    "refusing FlockDB connections: %d are open (at most %d); %d refused so far",
                    max_connections,
                    max_connections,
                    self.refused,
                )

    return Server(
        processor,
        sock,
        iprot_factory=TBinaryProtocolFactory(),  # type: ignore[no-untyped-call]
        itrans_factory=CheckedFrames(TFramedTransport, idle_timeout, frame_timeout),
        otrans_factory=TFramedTransportFactory(),
        daemon=True,  # open connections do not keep a stopping process alive
    )


def listening_port(server: Any) -> int:
    """The port a server listens on once `.trans.listen()` ran (for port 0)."""
    port: int = server.trans.sock.getsockname()[1]
    return port
