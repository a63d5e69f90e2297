"""Run `assocdb serve` as a real process on a free port, for HTTP tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

READER = "reader-token-0123456789"
WRITER = "writer-token-0123456789"
ADMIN = "admin-token-0123456789ab"

TOKENS = f"""
[[token]]
name = "reader"
secret = "{READER}"
scopes = ["read"]

[[token]]
name = "writer"
secret = "{WRITER}"
scopes = ["read", "write"]

[[token]]
name = "admin"
secret = "{ADMIN}"
scopes = ["admin"]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """A running `assocdb serve` process."""

    def __init__(self, directory: Path | str, tokens: bool = True, *extra: str) -> None:
        """`directory`: the graph (a directory, or a server URL with its journal)."""
        self.directory = directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("ASSOCDB_TOKEN", "PROMETHEUS"))
        }
        if tokens:
            home = directory.parent if isinstance(directory, Path) else Path(tempfile.gettempdir())
            tokens_file = home / f"tokens-{self.port}.toml"
            tokens_file.write_text(TOKENS)
            env["ASSOCDB_TOKENS_FILE"] = str(tokens_file)
        command = [
            sys.executable,
            "-c",
            "from assocdb.cli.main import main; main()",
            "serve",
            str(directory),
        ]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port), *extra],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self._wait()

    def _wait(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                assert self.process.stderr is not None
                raise RuntimeError(f"the server exited: {self.process.stderr.read().decode()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=0.5).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("the server did not start within 30 s")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.process.stderr is not None:
            self.process.stderr.close()
