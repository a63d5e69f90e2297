"""Redis for tests: the address from ASSOCDB_TEST_REDIS_URL (skip without it, unless
ASSOCDB_TEST_REQUIRE_SERVICES=1), and throwaway redis-server processes for outages."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.http_server import free_port


def redis_url() -> str:
    url = os.environ.get("ASSOCDB_TEST_REDIS_URL")
    if url:
        return url
    if os.environ.get("ASSOCDB_TEST_REQUIRE_SERVICES") == "1":
        pytest.fail("ASSOCDB_TEST_REDIS_URL is not set but services are required")
    pytest.skip("ASSOCDB_TEST_REDIS_URL is not set")


class RedisProcess:
    """A private redis-server, to kill mid-test."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("no redis-server on PATH")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(directory),
            ],
            stdout=subprocess.DEVNULL,
        )
        import redis

        client = redis.Redis.from_url(self.url)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.RedisError:
                time.sleep(0.05)
        client.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
