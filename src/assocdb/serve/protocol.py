"""The HTTP protocol `assocdb serve` runs: uvicorn's own, with a deadline for a request's head.

uvicorn closes a connection left idle after a response (keep-alive, 5 s), but
not one that has not yet sent a whole request: a connection that sends
nothing, or half a request line, or headers a byte a minute, was held until
the client left. Each holds a file descriptor, and once the process has none
left, accept() fails for every client. Here a connection must send a whole
request head within `header_timeout` seconds of opening, or of its last
answer, or it is closed. (A body then has the request's deadline: server.py.)
"""

from __future__ import annotations

import asyncio
import functools
import os
from typing import Any

import msgspec
from uvicorn.protocols.http.auto import AutoHTTPProtocol

HEADER_TIMEOUT = 10.0  # seconds; `assocdb serve --header-timeout`
_Base: Any = AutoHTTPProtocol  # httptools' when installed, else h11's


@functools.cache
def header_timeout() -> float:
    """The worker's `header_timeout`, from the configuration `assocdb serve` hands it."""
    config = msgspec.json.decode(os.environ.get("ASSOCDB_SERVE", "{}").encode())
    return float(config.get("header_timeout", HEADER_TIMEOUT))


class HeadDeadline(_Base):  # type: ignore[misc]
    """uvicorn's HTTP protocol, closing a connection whose request head is late."""

    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(header_timeout(), self._late, self.cycle)

    def _late(self, cycle: Any) -> None:
        """Close the connection if no request began since the timer was armed (a request
        begins, a new cycle, once its head is whole)."""
        waiting = self.cycle is None or self.cycle.response_complete
        if self.cycle is cycle and waiting and not self.transport.is_closing():
            self.transport.close()
