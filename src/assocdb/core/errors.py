"""The one exception tree of assocdb.

    AssocdbError                  base of everything assocdb raises
    ├── InvalidRequest            bad input; nothing was changed        (HTTP 400)
    │   ├── UnknownType           an association or object type that is not defined
    │   ├── DataTooLarge          data over its size limit              (HTTP 413)
    │   ├── InvalidCursor         a malformed cursor, or one from another list
    │   └── SchemaError           a definition that conflicts with the schema
    ├── Unauthenticated           no or unknown bearer token            (HTTP 401)
    ├── PermissionDenied          the token lacks the scope needed      (HTTP 403)
    ├── NotFound                  no such object or association         (HTTP 404)
    ├── Conflict                  the id is taken by a different object (HTTP 409)
    ├── FeedExpired               a feed cursor older than the retention (HTTP 410)
    └── Unavailable               a backend is down or too slow; retry  (HTTP 503)
        └── Timeout               the request ran out of time

Lower-level errors (sqlite3, MySQLdb, …) are translated in one function per
backend and never reach a user. Every error has a stable `code` (the HTTP layer
sends it) and optional `details` with the offending values.
"""

from __future__ import annotations

from typing import Any, ClassVar


class AssocdbError(Exception):
    """Base class of every error assocdb raises."""

    code: ClassVar[str] = "error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidRequest(AssocdbError):
    """The request is malformed or out of range; the store was not changed."""

    code = "invalid_request"


class UnknownType(InvalidRequest):
    """The association or object type is not defined in the schema."""

    code = "unknown_type"


class DataTooLarge(InvalidRequest):
    """The data is larger than its limit (objects 1 MiB, associations 64 KiB)."""

    code = "data_too_large"


class InvalidCursor(InvalidRequest):
    """The cursor is malformed, or was issued for another list or query."""

    code = "invalid_cursor"


class SchemaError(InvalidRequest):
    """A type definition conflicts with the schema already stored."""

    code = "schema_error"


class Unauthenticated(AssocdbError):
    """The request carried no bearer token, or one the server does not know."""

    code = "unauthenticated"


class PermissionDenied(AssocdbError):
    """The token is known but lacks the scope (read, write, admin) the call needs."""

    code = "permission_denied"


class NotFound(AssocdbError):
    """The object or association does not exist."""

    code = "not_found"


class Conflict(AssocdbError):
    """The id is already used by a different object."""

    code = "conflict"


class KeyTaken(Conflict):
    """A unique index's key is held by another object: `holder`, its id (kept out of
    `details`, which are sent to clients)."""

    def __init__(self, message: str, holder: int, **details: Any) -> None:
        super().__init__(message, **details)
        self.holder = holder


class FeedExpired(AssocdbError):
    """A feed cursor points before the oldest change still held (trimmed by the retention
    window). `details["oldest"]`: per shard, the oldest position still held."""

    code = "feed_expired"


class Unavailable(AssocdbError):
    """A backend is down, locked or too slow. The request may be retried."""

    code = "unavailable"


class Timeout(Unavailable):
    """The call did not finish within its deadline; it may or may not have taken effect."""

    code = "timeout"


def no_graph(where: str) -> NotFound:
    """The error for opening, without creating, a place that holds no graph."""
    return NotFound(f"no graph at {where} (create one with `assocdb init {where}`)")
