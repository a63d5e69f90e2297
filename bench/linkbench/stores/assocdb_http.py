"""assocdb through its server: `assocdb serve` in its own process, `assocdb.Client`.

The load phase writes the directory in process, exactly as the embedded store
does (bulk_load and obj_add: loading over HTTP would time the wire, not the
store); then the graph is closed, `assocdb serve` is started on it, and every
request goes through `assocdb.Client`, which has Graph's methods, so the
mapping of LinkBench onto assocdb is `AssocdbStore`'s, unchanged.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import httpx

import assocdb

from ..config import RANGE_LIMIT
from ..load import LoadNode
from .assocdb_embedded import AssocdbStore


class AssocdbHttpStore(AssocdbStore):
    """`AssocdbStore` whose requests go to a local `assocdb serve` process."""

    name = "assocdb-http"

    def __init__(self, directory: str | Path, link_types: Sequence[int], shards: int = 16) -> None:
        super().__init__(directory, link_types, shards)
        self._directory = Path(directory) / "graph"
        self._server: subprocess.Popen[bytes] | None = None

    def load_nodes(self, nodes: Iterable[LoadNode]) -> int:
        count = super().load_nodes(nodes)
        self._serve()  # the load is complete: from here on, requests go over HTTP
        return count

    def _serve(self) -> None:
        self.graph.close()
        port = _free_port()
        command = [
            *(sys.executable, "-m", "assocdb", "serve", str(self._directory)),
            *("--port", str(port), "--cache-prefix", str(RANGE_LIMIT + 1)),
        ]
        self._server = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        _wait_ready(url, self._server)
        self.graph = assocdb.Client(url, timeout=30.0)  # type: ignore[assignment]

    def describe(self) -> str:
        return (
            f"{self.name}: assocdb serve (1 worker, uvicorn) on {self.shards} SQLite shards,"
            " fsynced journal, in-process cache; requests through assocdb.Client"
        )

    def close(self) -> None:
        self.graph.close()
        if self._server is not None:
            self._server.terminate()
            self._server.wait(timeout=30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_ready(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"assocdb serve exited with {server.returncode}")
        try:
            if httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"assocdb serve did not become ready at {url}")
