"""`assocdb serve-thrift`: FlockDB's Thrift interface on a graph."""

from __future__ import annotations

import signal
import socket
import sys
from types import FrameType

import click

from ..api.open import open_graph
from ..core.extras import require
from ..core.records import CacheConfig
from .graph import NEW_GRAPH
from .params import Seconds


@click.command("serve-thrift")
@click.argument("directory", type=NEW_GRAPH)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=7915, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--graph",
    "graphs",
    multiple=True,
    metavar="N=TYPE",
    help="FlockDB graph N is association type TYPE (repeat for each graph). Without any, "
    "graph n is the type of schema id n.",
)
@click.option(
    "--insecure",
    is_flag=True,
    help="Listen on a non-loopback address: FlockDB's protocol has no authentication.",
)
@click.option(
    "--max-connections",
    default=512,
    show_default=True,
    type=click.IntRange(1),
    help="Connections open at once (a thread each); more are closed when accepted.",
)
@click.option(
    "--idle-timeout",
    default=600.0,
    show_default=True,
    type=Seconds(0, 86400),
    help="Seconds a connection may wait for its next request (0: no limit).",
)
@click.option(
    "--frame-timeout",
    default=30.0,
    show_default=True,
    type=Seconds(0, 3600, min_open=True),
    help="Seconds for a request to arrive once begun, and for an answer to be taken.",
)
@click.option("--cache-mb", default=256, show_default=True, type=click.IntRange(0))
@click.option("--no-cache", is_flag=True, help="Serve uncached (the same as --cache-mb 0).")
@click.option(
    "--redis",
    envvar="ASSOCDB_REDIS",
    help="Redis URL of the shared cache tier (needed for a cache with several processes).",
)
def serve_thrift(
    directory: str,
    host: str,
    port: int,
    graphs: tuple[str, ...],
    insecure: bool,
    max_connections: int,
    idle_timeout: float,
    frame_timeout: float,
    cache_mb: int,
    no_cache: bool,
    redis: str | None,
) -> None:
    """Serve the graph in DIRECTORY (or at a MySQL URL, or on a shard map) over
    FlockDB's Thrift interface: framed transport, binary protocol.

    Writes of priority High and Medium are applied before `execute` returns;
    Low ones once journaled. Several processes may serve one graph on the same
    port (SO_REUSEPORT): give them --redis, or --no-cache.

    Example: assocdb serve-thrift data/graph --graph 1=follows --graph 2=blocks
    """
    require("thriftpy2", "thrift", "assocdb serve-thrift")
    if redis is not None:
        require("redis", "redis", "assocdb serve-thrift --redis")
    from ..flock.graphs import GraphTable, parse_table
    from ..flock.server import make_server
    from ..serve.auth import is_loopback

    if not insecure and not is_loopback(host):
        raise click.ClickException(
            f"refusing to listen on {host}: FlockDB's protocol has no authentication "
            "(add --insecure on a trusted network)"
        )
    table = parse_table(graphs) if graphs else None
    cache = None if no_cache or not cache_mb else CacheConfig(max_bytes=cache_mb << 20, redis=redis)
    port = _shareable_port(host, port)
    graph = open_graph(directory, cache=cache, create=False)  # `assocdb init` creates
    try:
        mapping = GraphTable(graph, table)
        server = make_server(
            graph, mapping, host, port, max_connections, idle_timeout or None, frame_timeout
        )
        signal.signal(signal.SIGTERM, _stop)
        click.echo(
            f"serving {directory} on thrift://{host}:{port} (FlockDB: framed, binary; "
            f"{mapping.describe()})",
            err=True,
        )
        server.serve()
    except KeyboardInterrupt:
        pass
    finally:
        graph.close()


def _shareable_port(host: str, port: int) -> int:
    """The port to serve on (a free one for 0); OSError if a process that does not share
    it holds it. Several serve-thrift processes share one (SO_REUSEPORT, as thriftpy2
    binds it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from None
        bound: int = probe.getsockname()[1]
        return bound


def _stop(signum: int, frame: FrameType | None) -> None:
    """SIGTERM: leave the accept loop; the graph is closed on the way out."""
    sys.exit(0)
