"""A bounded pool of connections to one PostgreSQL server, on psycopg_pool.

`psycopg_pool.ConnectionPool` keeps the idle connections, bounds how many are
open (`pool_size`), opens one in its worker thread when a caller finds none
idle, and replaces one that comes back closed. `Pool` lends them as the engine
wants them, and adds two things:

* Whether a connection is pooled (`setup(conn, pooled)`): one from the pool,
  which also opens them ahead of need, may have sat idle and been closed by
  the server meanwhile, and the engine then runs its statement once more on
  another (`sql.SQLBackend._stale`). Only a direct connection (below) is new
  for sure.
* The server's own error, at once, when it refuses connections. The pool's
  worker keeps a failed connect to itself (it logs it and tries again), and a
  caller waiting on the pool learns only that its wait ran out. So a caller
  connects directly while nothing shows the server accepts connections: before
  the pool's first connection, after a direct connect failed and after the
  server closed an idle connection (`renew`), after the pool's worker failed to
  connect (`_refused`: a caller waiting on the pool looks after `_SLICE`, then
  at doubling intervals up to `_MAX_SLICE`), and
  when the pool let it wait in vain though it could have opened one more. A
  direct connection serves that one caller and is closed when it comes back;
  the first that succeeds sends callers back to the pool. At most `size` are
  open at once besides the pool's, so a server coming back is not met by every
  caller.

The pool opens nothing ahead of need (`min_size=0`), runs one worker, and gives
up a failed background connect after one retry (`reconnect_timeout=0`): a
server that is down costs no loop of retries behind the callers' backs.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from ..core.errors import InvalidRequest, Unavailable
from ..core.extras import require
from .pgconn import connect, connect_kwargs, driver
from .serverurl import Settings

_SLICE = 0.05  # seconds a caller waits for the pool before it first looks at `_direct`
#: The longest wait between looks. Each look leaves psycopg_pool a timed-out waiter
#: (about 3 KB with its exception) until a connection comes back: at a fixed 50 ms, a
#: caller waiting out the maintenance pool's 600 s would leave 12,000 (37 MB).
_MAX_SLICE = 1.0


class Pool:
    """At most `size` pooled connections to the server `settings` names, each made with
    `statement_timeout` and then given to `setup` (with whether it is pooled: else
    direct); a caller waits up to `wait` seconds for one."""

    def __init__(
        self,
        settings: Settings,
        statement_timeout: float,
        size: int,
        wait: float,
        setup: Callable[[Any, bool], None],
    ) -> None:
        driver()  # first: without the extra, MissingExtra names the driver
        pools = require("psycopg_pool", "postgres", "a postgresql:// graph")
        self._settings = settings
        self._statement_timeout = statement_timeout
        self._size = size
        self._wait = wait
        self._setup = setup
        self._direct = True  # no connection yet shows the server accepts them
        self._directs = threading.BoundedSemaphore(size)  # direct connections lent
        self._closed = False
        self._timeout: type[Exception] = pools.PoolTimeout
        self._pool_closed: type[Exception] = pools.PoolClosed
        self._pool = pools.ConnectionPool(
            kwargs=connect_kwargs(settings, statement_timeout),
            min_size=0,
            max_size=size,
            open=True,
            configure=self._configure,
            timeout=wait,
            reconnect_timeout=0.0,
            reconnect_failed=self._refused,
            num_workers=1,
            name=f"assocdb {settings.host}:{settings.port}/{settings.name}",
        )

    def _refused(self, pool: Any) -> None:
        """The pool's worker could not connect: callers connect directly again, so the
        next one gets the server's own error at once (not after waiting on the pool)."""
        self._direct = True

    def _configure(self, conn: Any) -> None:
        """A new pooled connection (in the pool's worker)."""
        self._setup(conn, True)
        conn.assocdb_pooled = True

    def get(self) -> Any:
        """A connection (one from the pool may have sat idle, and gone stale).

        The wait for the pool is taken in slices: if the pool's worker fails to
        connect meanwhile (`_refused`), the caller connects directly and has the
        server's own error at once, not at the end of its wait."""
        if self._direct and self._directs.acquire(blocking=False):
            return self._connect_directly()
        deadline = time.monotonic() + self._wait
        look = _SLICE
        while True:
            try:
                return self._pool.getconn(min(look, max(deadline - time.monotonic(), 0.001)))
            except self._timeout:
                look = min(2 * look, _MAX_SLICE)
                if self._direct and self._directs.acquire(blocking=False):
                    return self._connect_directly()
                if time.monotonic() >= deadline:
                    return self._after_waiting()
            except self._pool_closed:
                raise InvalidRequest("this graph has been closed") from None

    def _after_waiting(self) -> Any:
        """A direct connection when the pool could have opened one more but did not
        (the server's own error if that fails); Unavailable when all were lent."""
        room = self._pool.get_stats().get("pool_size", 0) < self._size
        if room and self._directs.acquire(blocking=False):
            return self._connect_directly()
        raise Unavailable(
            f"no free database connection within {self._wait} s (all {self._size} in use)"
        )

    def _connect_directly(self) -> Any:
        """A connection outside the pool (a slot of `_directs` taken)."""
        try:
            if self._closed:
                raise InvalidRequest("this graph has been closed")
            conn = connect(self._settings, self._statement_timeout)
            try:
                self._setup(conn, False)
            except BaseException:
                _close_quietly(conn)
                raise
        except BaseException:
            self._direct = True
            self._directs.release()
            raise
        conn.assocdb_pooled = False
        self._direct = False
        return conn

    def put(self, conn: Any) -> None:
        """Take back a lent connection. The pool lends it again if it is open and idle,
        rolls back a transaction left open (closing it if that fails), and replaces a
        closed one (in the background)."""
        if conn.assocdb_pooled:
            self._pool.putconn(conn)
        else:
            _close_quietly(conn)
            self._directs.release()

    def renew(self) -> None:
        """Replace the idle connections (in the background), and connect directly until
        one succeeds: the server closed one that was idle, so it has likely closed them
        all (a restart), and may not be back yet."""
        self._direct = True
        self._pool.drain()

    def close(self) -> None:
        """Close the idle connections; the lent ones are closed as they come back."""
        self._closed = True
        self._pool.close()


def _close_quietly(conn: Any) -> None:
    with contextlib.suppress(Exception):  # already dead: nothing to release
        conn.close()
