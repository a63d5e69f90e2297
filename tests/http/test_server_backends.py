"""`assocdb serve` over a graph on each backend: the server takes a server URL too."""

from __future__ import annotations

from assocdb import Client
from tests.support.http_server import WRITER, Server
from tests.support.stores import Stores


def test_the_server_serves_a_graph_on_every_backend(stores: Stores) -> None:
    where, journal = stores.location("served")
    with stores.open(at=(where, journal), shards=2) as g:
        g.define_assoc("follows", inverse="followed_by")
    target = where if stores.kind == "sqlite" else f"{where}&journal={journal}"
    server = Server(target)
    try:
        with Client(server.url, token=WRITER) as client:
            assert client.assoc_add(1, "follows", 2, time=5).status == "applied"
            assert [(a.id2, a.time) for a in client.assoc_range(2, "followed_by")] == [(1, 5)]
            assert client.assoc_count(1, "follows") == 1
    finally:
        server.stop()
