"""Connections to one MySQL/MariaDB server: URL settings, the driver, a bounded pool.

The driver is mysqlclient (`MySQLdb`, C, releases the GIL while it waits)
when it can be imported, else PyMySQL (pure Python). Both speak PEP 249 with
the `%s` paramstyle and rewrite `executemany` of an `INSERT ... VALUES` into
multi-row INSERTs, so the backend's SQL is the same for both.

Timeouts are aggressive by default (connect 1 s, each socket read or write
2 s): a server that hangs must cost a caller seconds, not minutes, so the
journal can queue the write and the caller moves on. mysqlclient takes whole
seconds; fractions are rounded up for it.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ..core.errors import InvalidRequest, Unavailable
from ..core.extras import require
from .serverurl import Settings, parse_server_url, settings_of


def driver() -> ModuleType:
    """mysqlclient's MySQLdb if it imports, else PyMySQL."""
    try:
        return importlib.import_module("MySQLdb")
    except ImportError:
        return require("pymysql", "mysql", "a mysql:// graph")


#: The storage engines a MySQL graph's tables may use, by their URL spelling.
ENGINES = {"innodb": "InnoDB", "rocksdb": "ROCKSDB"}


def parse_url(url: str, **overrides: Any) -> Settings:
    """Settings from `mysql://user:pw@host:port/NAME?shards=16&query_timeout=2`.

    Options in the query string: shards, connect_timeout, query_timeout,
    pool_size, engine (`innodb`, the default, or `rocksdb`: MyRocks, which the
    server must have loaded); keyword `overrides` that are not None win over them.
    """
    given = parse_server_url(
        url, "mysql", "mysql://root@127.0.0.1:3306/mygraph", frozenset({"engine"}), overrides
    )
    engine = str(given.options.get("engine", "innodb")).lower()
    if engine not in ENGINES:
        raise InvalidRequest(
            f"unknown mysql URL engine {engine!r} in {url!r}: use one of {sorted(ENGINES)}"
        )
    return settings_of(given, "mysql", 3306, "root", engine=ENGINES[engine])


def connect_args(settings: Settings, mysqlclient: bool, read_timeout: float) -> dict[str, Any]:
    """Keyword arguments of `connect()` for either driver."""
    seconds: Callable[[float], float] = (lambda s: max(1, math.ceil(s))) if mysqlclient else float
    # A lock wait gives up before the socket read does, so a blocked write
    # ends with a clean server error (and a usable connection), not a hang.
    lock_wait = max(1, int(read_timeout / 2))
    rocks = ""
    if settings.engine == "ROCKSDB":  # its own lock wait (1 s by default), and no
        # deadlock detection by default: a cycle would wait out the lock wait, not rerun
        rocks = f"rocksdb_lock_wait_timeout = {lock_wait}, rocksdb_deadlock_detect = ON, "
    return {
        "host": settings.host,
        "port": settings.port,
        "user": settings.user,
        "password": settings.password,
        "connect_timeout": seconds(settings.connect_timeout),
        "read_timeout": seconds(read_timeout),
        "write_timeout": seconds(read_timeout),
        "autocommit": True,
        "charset": "utf8mb4",
        "init_command": (
            f"SET SESSION innodb_lock_wait_timeout = {lock_wait}, {rocks}"
            "sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'"
        ),
    }


class Pool:
    """At most `size` connections to one server, shared by threads.

    `get` hands out an idle connection or opens one; `put` takes it back, or
    closes it when it is `broken` (after any driver error: the connection may
    be mid-transaction or dead, and a new one costs a millisecond).

    The bound is a count under one lock, not a semaphore: a get and a put
    each take the lock once (a `BoundedSemaphore` is a Python-level condition
    and cost a microsecond of every read); a caller waits on the condition only
    when every connection is lent, and a put wakes one waiter only then.
    """

    def __init__(self, connect: Callable[[], Any], size: int, wait: float) -> None:
        self._connect = connect
        self._wait = wait
        self._free = size  # connections that may still be lent (idle or not yet opened)
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._waiting = 0
        self._closed = False

    def get(self) -> tuple[Any, bool]:
        """A connection, and whether it was reused (it may have gone stale)."""
        if self._closed:
            raise InvalidRequest("this graph has been closed")
        with self._lock:
            if self._free == 0 and not self._wait_for_slot():
                raise Unavailable(f"no free database connection within {self._wait} s")
            self._free -= 1
            conn = self._idle.pop() if self._idle else None
        if conn is not None:
            return conn, True
        try:
            return self._connect(), False
        except BaseException:
            self._release()
            raise

    def _wait_for_slot(self) -> bool:
        """Wait (the lock held) until a connection is given back; False on timeout."""
        self._waiting += 1
        try:
            return self._freed.wait_for(lambda: self._free > 0, self._wait)
        finally:
            self._waiting -= 1

    def put(self, conn: Any, broken: bool) -> None:
        if broken:  # closed before its slot is free: never more than `size` open
            _close_quietly(conn)
        with self._lock:
            keep = not broken and not self._closed
            if keep:
                self._idle.append(conn)
            self._release_locked()
        if not keep and not broken:  # the pool was closed meanwhile
            _close_quietly(conn)

    def _release(self) -> None:
        with self._lock:
            self._release_locked()

    def _release_locked(self) -> None:
        self._free += 1
        if self._waiting:
            self._freed.notify()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            _close_quietly(conn)


def _close_quietly(conn: Any) -> None:
    with contextlib.suppress(Exception):  # already dead: nothing to release
        conn.close()


def errno_of(exc: BaseException) -> int | None:
    """The server's or client's error number behind a mapped driver error."""
    cause = exc.__cause__
    args = getattr(cause, "args", ())
    return args[0] if args and isinstance(args[0], int) else None
