"""The ASGI entry of a worker (`Front`), and the app `assocdb serve` runs in each
worker (`app_from_env`), configured by the ASSOCDB_SERVE variable."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..client.wire import (
    error_body,
)
from ..core.errors import (
    AssocdbError,
    PermissionDenied,
)
from ..core.records import CacheConfig
from .auth import Tokens, is_loopback
from .peers import Peers
from .server import JSON, Limits, Server, create_app

log = logging.getLogger("assocdb.server")


class Front:
    """The ASGI entry of a worker: `POST /v1/<name>` goes straight to its handler
    (Starlette's middleware, router and wrappers took ~15% of a cached read's
    request); everything else, and every other answer, is the Starlette app's.

    A server without tokens (on loopback) answers only requests addressed to a
    loopback host: a web page whose own name was made to resolve to 127.0.0.1
    (DNS rebinding) is of the same origin as the server for the browser, and
    could otherwise read and change everything, console forms included."""

    def __init__(self, app: Starlette) -> None:
        self.app = app
        self.server: Server = app.state.server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.server.tokens.enabled:
            host = _host_of(scope)
            if host is not None and not is_loopback(host):
                denied = PermissionDenied(
                    f"this server has no tokens: it answers requests for localhost or a "
                    f"loopback address, not for {host!r}"
                )
                response = Response(error_body(denied), status_code=403, media_type=JSON)
                await response(scope, receive, send)
                return
        if scope["type"] == "http" and scope["method"] == "POST":
            path: str = scope["path"]
            name = path[4:]
            if path.startswith("/v1/") and name and "/" not in name:
                request = Request(scope, receive)
                try:
                    if name == "batch":
                        response = await self.server.route_batch(request)
                    else:
                        response = await self.server.method(request, name)
                except Exception:  # what Starlette's ServerErrorMiddleware would catch
                    log.exception("%s failed unexpectedly", name)
                    internal = AssocdbError("internal error; the server log has the details")
                    response = Response(error_body(internal), status_code=500, media_type=JSON)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _host_of(scope: Scope) -> str | None:
    """The host name (or address) a request is addressed to, without its port."""
    for key, value in scope["headers"]:
        if key == b"host":
            host: str = value.decode("latin-1").strip().lower()
            if host.startswith("["):  # an IPv6 literal: [::1]:8080
                return host[1:].partition("]")[0]
            return host.rpartition(":")[0] if host.count(":") == 1 else host
    return None


def app_from_env() -> Front:
    """The app a `assocdb serve` worker runs, configured by the ASSOCDB_SERVE variable."""
    from contextlib import asynccontextmanager

    from ..api.open import open_graph

    config = msgspec.json.decode(os.environ["ASSOCDB_SERVE"].encode())
    cache = None
    if config["cache_bytes"]:
        cache = CacheConfig(
            max_bytes=config["cache_bytes"],
            max_age=config["cache_max_age"],
            prefix=config["cache_prefix"],
            redis=config["redis"],
        )
    # The workers' ring of invalidations takes tier 2's place in the cache.
    peers = Peers(config["peers"]) if config.get("peers") and cache is not None else None
    graph = open_graph(config["path"], sync=config["sync"], cache=cache, tier2=peers)
    if peers is not None:  # a long poll sees the other workers' writes as soon as its own
        graph.services.feed.watch(peers.sequence)
    if config.get("cleaner"):
        graph.start_cleaner()
    inline = graph.engine.backend.local
    limits = Limits(config["max_body"], config["max_batch"], config["deadline"], inline)
    key = config.get("session_key")
    sessions = config.get("sessions_dir")
    app = create_app(
        graph,
        Tokens.load(config.get("tokens_file")),
        limits,
        bytes.fromhex(key) if key else None,
        Path(sessions) if sessions else None,
        peers,
    )
    server: Server = app.state.server

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        server.console.close()
        server.metrics.close()
        await anyio.to_thread.run_sync(graph.close)

    app.router.lifespan_context = lifespan
    return Front(app)
