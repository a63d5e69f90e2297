"""Connections to one PostgreSQL server: URL settings, connecting, errors, a watchdog.

The driver is psycopg 3 (the `psycopg[binary]` wheel, or its pure-Python
build). Connections are in autocommit mode; a write transaction is an
explicit `BEGIN ISOLATION LEVEL REPEATABLE READ` (see `postgres.py`).

Timeouts are aggressive by default, as on MySQL (connect 1 s, a statement
2 s): `connect_timeout` bounds connecting, the server's `statement_timeout`
a statement and `lock_timeout` (half of it) a wait for a row lock, so a
blocked write ends with a clean server error on a usable connection. A
server that stopped answering at all (a stopped process, a dead host whose
kernel still acknowledges) enforces none of them, and libpq has no read
timeout: the `Watchdog` shuts down the socket of a statement that overran its
deadline, which ends the wait with a connection error (`Unavailable`).

Errors are mapped by SQLSTATE class (`map_pg_error`): serialization
failures, deadlocks, lock and statement timeouts, lost connections and a
server shutting down are `Unavailable` (retryable); a data exception is
`InvalidRequest`; the rest are assocdb bugs (`AssocdbError`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from typing import Any

from ..core.errors import AssocdbError, InvalidRequest, Unavailable
from ..core.extras import require
from .backend import map_driver_error, one_line
from .serverurl import Settings, parse_server_url, settings_of

#: SQLSTATE classes (the first two characters) and what they mean for a caller.
_CLASSES: dict[str, type[AssocdbError]] = {
    "08": Unavailable,  # connection exception
    "40": Unavailable,  # transaction rollback: serialization failure, deadlock (rerun)
    "53": Unavailable,  # insufficient resources: disk full, too many connections
    "55": Unavailable,  # object not in prerequisite state: lock_timeout (55P03)
    "57": Unavailable,  # operator intervention: statement_timeout, shutdown, starting up
    "58": Unavailable,  # system error: I/O
    "XX": Unavailable,  # internal error (a corrupt page: another replica may answer)
    "22": InvalidRequest,  # data exception: a value out of range
    "23": AssocdbError,  # integrity violation: never expected, writes are merges
    "42": AssocdbError,  # syntax error or a missing table: assocdb's SQL
}


def driver() -> Any:
    """psycopg 3, or MissingExtra naming the postgres extra."""
    return require("psycopg", "postgres", "a postgresql:// graph")


def parse_url(url: str, **overrides: Any) -> Settings:
    """Settings from `postgresql://user:pw@host:5432/NAME?database=app&shards=16`.

    The path names the graph; its schemas live in `database` (default
    `postgres`). Other options: shards, connect_timeout, query_timeout,
    pool_size; keyword `overrides` that are not None win over them.
    """
    given = parse_server_url(
        url,
        "postgres",
        "postgresql://postgres@127.0.0.1:5432/mygraph",
        frozenset({"database"}),
        overrides,
    )
    database = str(given.options.get("database", "postgres"))
    return settings_of(given, "postgresql", 5432, "postgres", database)


def connect_kwargs(settings: Settings, statement_timeout: float) -> dict[str, Any]:
    """Keyword arguments of `psycopg.connect()`: autocommit, and the server's timeouts."""
    ms = max(1, int(statement_timeout * 1000))
    options = (
        f"-c statement_timeout={ms} -c lock_timeout={max(1, ms // 2)} "
        # A client that vanished mid-transaction must not hold its locks for ever.
        f"-c idle_in_transaction_session_timeout={max(60_000, 2 * ms)}"
    )
    return {
        "host": settings.host,
        "port": settings.port,
        "user": settings.user,
        "password": settings.password or None,
        "dbname": settings.database,
        "connect_timeout": max(1, round(settings.connect_timeout)),
        "options": options,
        "autocommit": True,
        "application_name": "assocdb",
    }


def connect(settings: Settings, statement_timeout: float) -> Any:
    """A new autocommit connection with the timeouts set; errors mapped."""
    psycopg = driver()
    try:
        return psycopg.connect(**connect_kwargs(settings, statement_timeout))
    except Exception as exc:
        raise map_pg_error(exc, f"connecting to {settings.host}:{settings.port}") from exc


def sqlstate_of(exc: BaseException) -> str | None:
    """The SQLSTATE behind a mapped driver error (None: not a server error)."""
    state = getattr(exc.__cause__, "sqlstate", None)
    return state if isinstance(state, str) else None


def map_pg_error(exc: Exception, where: str) -> AssocdbError:
    """The assocdb error for a psycopg exception: by SQLSTATE class when the server
    sent one, else by PEP 249 class name (`backend.map_driver_error`)."""
    state = getattr(exc, "sqlstate", None)
    kind = _CLASSES.get(state[:2]) if isinstance(state, str) else None
    if kind is None:
        return map_driver_error(exc, where)
    message = f"{where}: {type(exc).__name__} ({state}): {one_line(exc)}"
    return kind(message, backend_error=type(exc).__name__)


class Watchdog:
    """Ends statements that overran their deadline by shutting down their socket.

    `watch(conn, seconds)` before a statement, `done(conn)` after it: two dict
    operations. One daemon thread for the whole process checks the deadlines
    a few times a second; the statement's driver call then fails with a lost
    connection, and the session is thrown away.
    """

    TICK = 0.1

    def __init__(self) -> None:
        self._deadlines: dict[int, tuple[float, Any]] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, conn: Any, seconds: float) -> None:
        self._deadlines[id(conn)] = (time.monotonic() + seconds, conn)
        if self._thread is None:
            self._start()

    def done(self, conn: Any) -> None:
        self._deadlines.pop(id(conn), None)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="assocdb-pg-watchdog", daemon=True
                )
                self._thread.start()

    def _loop(self) -> None:
        while True:
            time.sleep(self.TICK)
            now = time.monotonic()
            for key, (deadline, conn) in list(self._deadlines.items()):
                if deadline < now and self._deadlines.pop(key, None) is not None:
                    _shut_down(conn)


def _shut_down(conn: Any) -> None:
    """Wake whoever waits on `conn` with an end of stream (the descriptor stays its own)."""
    with contextlib.suppress(Exception):  # already closed
        sock = socket.socket(fileno=os.dup(conn.fileno()))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


WATCHDOG = Watchdog()
