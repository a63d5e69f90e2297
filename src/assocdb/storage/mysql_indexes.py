"""The MySQL/MariaDB side of secondary indexes (`_entities`) and object scans, as a mixin.

`MySQLBackend` (`_mysql.py`) inherits `MySQLIndexes`; these methods use its
choke point (`_run`, `_query`, `_in_transaction`, `_q`). Each index is a
table `index_N` in every shard's schema, created on first write:

    ikey VARBINARY(1024), id BIGINT -> updated_at BIGINT, version BIGINT, state TINYINT
    PRIMARY KEY (ikey, id), KEY (id)

A DDL statement commits implicitly in MySQL, so the table is created before
the write's transaction, once per process (a table dropped behind its back
fails the write as Unavailable, the journal retries, and the retry creates
it again). `index_apply` reads the current entries with a locking read and
merges with `_entities.merge_entries`, as `apply` does for other rows. Range
scans spell the `(ikey, id)` boundary out (`ikey > k OR ikey = k AND id > i`
within `ikey >= k`), which InnoDB turns into one range.

The object scans need `KEY objects_recent (otype, updated_at)` on `objects`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..core.compress import unpack
from ..core.entities import merge_entries
from ..core.errors import AssocdbError, Unavailable
from ..core.merge import ObjRow
from ..core.scans import IndexEntry, IndexScan
from .mysqlpool import errno_of as _errno

_NO_TABLE = 1146  # ER_NO_SUCH_TABLE
_IN_CHUNK = 500
_OBJ_COLUMNS = "id, otype, state, version, updated_at, data"


class _Host(Protocol):
    """What the mixin needs of `MySQLBackend`."""

    shards: int

    def _q(self, template: str, shard: int) -> str: ...

    def _run(
        self, session: Any, shard: int, sql: str, params: Any = (), many: bool = False
    ) -> list[Any]: ...

    def _query(self, shard: int, sql: str, params: Any = ()) -> list[Any]: ...

    def _in_transaction(
        self, shard: int, body: Callable[[Any], Any], slow: bool = False
    ) -> Any: ...

    def _session(self, slow: bool = False) -> Any: ...


class MySQLIndexes:
    """objects_page, objects_count, objects_since and the index_* methods of `Backend`."""

    _index_tables: set[tuple[int, int]]
    _index_lock = threading.Lock()

    # -- object scans -----------------------------------------------------------------

    def objects_page(self, shard: int, otype: int, after: int, limit: int) -> list[ObjRow]:
        host: _Host = self  # type: ignore[assignment]
        sql = (
            f"SELECT {_OBJ_COLUMNS} FROM {{s}}.objects WHERE id > %s AND otype = %s "
            "ORDER BY id LIMIT %s"
        )
        return [_obj(r) for r in host._query(shard, host._q(sql, shard), (after, otype, limit))]

    def objects_count(self, shard: int, otype: int) -> int:
        host: _Host = self  # type: ignore[assignment]
        sql = host._q("SELECT COUNT(*) FROM {s}.objects WHERE otype = %s", shard)
        return int(host._query(shard, sql, (otype,))[0][0])

    def objects_since(
        self, shard: int, otype: int, after: tuple[int, int], limit: int
    ) -> list[ObjRow]:
        host: _Host = self  # type: ignore[assignment]
        sql = (
            f"SELECT {_OBJ_COLUMNS} FROM {{s}}.objects FORCE INDEX (objects_recent) "
            "WHERE otype = %s AND updated_at >= %s AND (updated_at > %s OR id > %s) "
            "ORDER BY updated_at, id LIMIT %s"
        )
        ua, id = after
        params = (otype, ua, ua, id, limit)
        return [_obj(r) for r in host._query(shard, host._q(sql, shard), params)]

    # -- index tables -------------------------------------------------------------------

    def index_apply(self, shard: int, entries: Sequence[IndexEntry]) -> int:
        by_index: dict[int, list[IndexEntry]] = {}
        for entry in entries:
            by_index.setdefault(entry[0], []).append(entry)
        for index in by_index:
            self._ensure_index_table(shard, index)
        host: _Host = self  # type: ignore[assignment]

        def body(session: Any) -> int:
            changed = 0
            for index, writes in by_index.items():
                ids = sorted({entry[2] for entry in writes})
                current = {e[:3]: e for e in self._entries(session, shard, index, ids, lock=True)}
                winners = merge_entries(current, writes)
                if winners:
                    sql = host._q(
                        f"INSERT INTO {{s}}.index_{index} (ikey, id, updated_at, version, state) "
                        "VALUES (%s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE "
                        "updated_at = VALUES(updated_at), version = VALUES(version), "
                        "state = VALUES(state)",
                        shard,
                    )
                    host._run(session, shard, sql, [e[1:] for e in winners], True)
                changed += len(winners)
            return changed

        try:
            done: int = host._in_transaction(shard, body)
        except AssocdbError as exc:
            if _errno(exc) != _NO_TABLE:
                raise
            with self._index_lock:
                self._tables().difference_update((shard, i) for i in by_index)
            raise Unavailable(f"shard {shard}: an index table was dropped; retrying") from exc
        return done

    def index_entries(self, shard: int, index: int, ids: Sequence[int]) -> list[IndexEntry]:
        host: _Host = self  # type: ignore[assignment]
        with host._session() as session:
            return self._missing_ok(lambda: self._entries(session, shard, index, ids, False))

    def index_scan(self, shard: int, index: int, scan: IndexScan) -> list[tuple[bytes, int]]:
        host: _Host = self  # type: ignore[assignment]
        cmp, order = ("<", "DESC") if scan.desc else (">", "ASC")
        sql = f"SELECT ikey, id FROM {{s}}.index_{index} WHERE ikey >= %s AND ikey < %s"
        params: list[Any] = [scan.low, scan.high]
        if scan.after is not None:
            edge = "<=" if scan.desc else ">="
            sql += f" AND ikey {edge} %s AND (ikey {cmp} %s OR id {cmp} %s)"
            params += [scan.after[0], scan.after[0], scan.after[1]]
        sql += f" AND state = 0 ORDER BY ikey {order}, id {order} LIMIT %s"
        query = host._q(sql, shard)
        rows = self._missing_ok(lambda: host._query(shard, query, [*params, scan.limit]))
        return [(bytes(k), int(i)) for k, i in rows]

    def index_export(
        self, shard: int, index: int, after: tuple[bytes, int] | None, limit: int
    ) -> list[IndexEntry]:
        host: _Host = self  # type: ignore[assignment]
        sql = f"SELECT ikey, id, updated_at, version, state FROM {{s}}.index_{index}"
        params: list[Any] = []
        if after is not None:
            sql += " WHERE ikey >= %s AND (ikey > %s OR id > %s)"
            params += [after[0], after[0], after[1]]
        sql += " ORDER BY ikey, id LIMIT %s"
        query = host._q(sql, shard)
        rows = self._missing_ok(lambda: host._query(shard, query, [*params, limit]))
        return [(index, bytes(k), int(i), int(u), int(v), int(s)) for k, i, u, v, s in rows]

    def index_purge(self, shard: int, index: int, before: int) -> int:
        host: _Host = self  # type: ignore[assignment]
        where = f"FROM {{s}}.index_{index} WHERE state = 3 AND updated_at < %s"
        count, delete = (
            host._q(f"SELECT COUNT(*) {where} FOR UPDATE", shard),
            host._q(f"DELETE {where}", shard),
        )

        def body(session: Any) -> int:  # drivers disagree on affected rows: count first
            (found,) = host._run(session, shard, count, (before,))[0]
            host._run(session, shard, delete, (before,))
            return int(found)

        try:
            purged: int = host._in_transaction(shard, body)
        except AssocdbError as exc:
            if _errno(exc) != _NO_TABLE:
                raise
            return 0
        return purged

    def index_drop(self, shard: int, index: int) -> None:
        host: _Host = self  # type: ignore[assignment]
        with self._index_lock:
            self._tables().discard((shard, index))
        with host._session(slow=True) as session:
            host._run(session, shard, host._q(f"DROP TABLE IF EXISTS {{s}}.index_{index}", shard))

    # -- internals -----------------------------------------------------------------------

    def _tables(self) -> set[tuple[int, int]]:
        tables = getattr(self, "_index_tables", None)
        if tables is None:
            tables = self._index_tables = set()
        return tables

    def _ensure_index_table(self, shard: int, index: int) -> None:
        if (shard, index) in self._tables():
            return
        host: _Host = self  # type: ignore[assignment]
        ddl = (
            f"CREATE TABLE IF NOT EXISTS {{s}}.index_{index} ("
            "ikey VARBINARY(1024) NOT NULL, id BIGINT NOT NULL, updated_at BIGINT NOT NULL, "
            "version BIGINT NOT NULL, state TINYINT NOT NULL, PRIMARY KEY (ikey, id), "
            f"KEY index_{index}_by_id (id)) ENGINE=InnoDB"
        )
        with host._session(slow=True) as session:  # DDL waits for the disk
            host._run(session, shard, host._q(ddl, shard))
        with self._index_lock:
            self._tables().add((shard, index))

    def _entries(
        self, session: Any, shard: int, index: int, ids: Sequence[int], lock: bool
    ) -> list[IndexEntry]:
        host: _Host = self  # type: ignore[assignment]
        found: list[IndexEntry] = []
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            sql = (
                f"SELECT ikey, id, updated_at, version, state FROM {{s}}.index_{index} "
                f"WHERE id IN ({','.join(['%s'] * len(chunk))})"
            ) + (" FOR UPDATE" if lock else "")
            rows = host._run(session, shard, host._q(sql, shard), chunk)
            found += [(index, bytes(k), int(i), int(u), int(v), int(s)) for k, i, u, v, s in rows]
        return found

    @staticmethod
    def _missing_ok(read: Callable[[], list[Any]]) -> list[Any]:
        try:
            return read()
        except AssocdbError as exc:
            if _errno(exc) != _NO_TABLE:
                raise
            return []  # nothing written to this index on this shard yet


def _obj(row: Any) -> ObjRow:
    return ObjRow(row[0], row[1], row[2], row[3], row[4], unpack(bytes(row[5])))
