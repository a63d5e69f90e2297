"""Keyset cursors and the paging rule every list uses.

A list is ordered by a key of integers, descending (`(time, id2)` for an
association list, `(id2,)` for a set-arithmetic result). A page never uses
OFFSET: it is one scan that starts just past a *boundary* key and reads
`limit + 1` rows (the extra row says whether there is more). So page 1,000 of
a celebrity's followers costs what page 1 costs, and a page is stable while
new items arrive: an item inserted above the boundary shows up when paging
back, never as a duplicate on the way down.

A cursor names a boundary, a direction and whether the boundary itself is
included:

* *forward* (the list's own order, towards older items): keys `< boundary`,
  or `<=` when inclusive;
* *backward* (towards newer items): keys `> boundary`, or `>=`.

A page costs exactly one scan, whichever page it is:

* the direction a page was read in has a cursor onwards when the scan found
  the extra row;
* the other direction always has one when the page was reached by a cursor,
  because the cursor came from there; the first page (no cursor) has none.
  A cursor is a position, not a snapshot: if everything on the other side
  was deleted meanwhile, following it gives an empty page.
* An empty page reached by a cursor offers only the way back, which starts at
  the complement of the boundary it started from (so the boundary item itself
  is included).

On the wire a cursor is opaque: url-safe base64 of a version byte, a flag
byte, the key as signed 64-bit integers, and an 8-byte BLAKE2b checksum over
those and the *scope* (an identity of the list or query). A cursor that was
mangled, or issued for another list, fails the checksum and is refused with
InvalidCursor instead of silently paging something else. Index pages, which
are ordered by a byte key, seal their `(key, id)` boundary the same way
(`encode_after`).
"""

from __future__ import annotations

import binascii
import struct
from base64 import urlsafe_b64decode, urlsafe_b64encode
from collections.abc import Callable, Sequence
from functools import lru_cache
from hashlib import blake2b
from typing import NamedTuple, TypeVar

from .errors import InvalidCursor

T = TypeVar("T")
CursorKey = tuple[int, ...]

_VERSION = 1
_BACKWARD = 1
_INCLUSIVE = 2
_MAC_SIZE = 8
_MAX_TOKEN = 128
_AFTER = struct.Struct(">Bq")  # version, id; the key's bytes follow


class Seek(NamedTuple):
    """Where a scan starts: past `boundary` (None: at the start) in a direction."""

    forward: bool
    boundary: CursorKey | None
    inclusive: bool


START = Seek(forward=True, boundary=None, inclusive=False)

#: `scan(seek, limit)` reads up to `limit` rows starting at `seek`, in the
#: direction of the seek (for backward seeks: nearest the boundary first).
Scan = Callable[[Seek, int], Sequence[T]]


def encode(scope: bytes, seek: Seek) -> str:
    """The opaque token for `seek` within the list named by `scope`."""
    boundary = seek.boundary
    if boundary is None:
        raise ValueError("the start of a list has no cursor")
    flags = (0 if seek.forward else _BACKWARD) | (_INCLUSIVE if seek.inclusive else 0)
    return _seal(scope, _layout(len(boundary)).pack(_VERSION, flags, *boundary))


def shown(value: object, width: int = 60) -> str:
    """`repr(value)`, cut short: an error message must not echo a megabyte back."""
    text = repr(value)
    return text if len(text) <= width else f"{text[: width - 5]}...{text[-2:]}"


def decode(scope: bytes, token: object, key_size: int) -> Seek:
    """The seek a token stands for, or InvalidCursor if it is not one of ours."""
    layout = _layout(key_size)
    body = _unseal(scope, token, _MAX_TOKEN, "list", lambda body: len(body) == layout.size)
    _, flags, *key = layout.unpack(body)
    return Seek(not flags & _BACKWARD, tuple(key), bool(flags & _INCLUSIVE))


def encode_after(scope: bytes, after: tuple[bytes, int]) -> str:
    """The token for a page of an ordered-key scan (an index) that ended at `after`."""
    key, id_ = after
    return _seal(scope, _AFTER.pack(_VERSION, id_) + key)


def decode_after(scope: bytes, token: object, max_key: int) -> tuple[bytes, int]:
    """The `(key, id)` an `encode_after` token stands for (keys up to `max_key` bytes)."""
    longest = 4 * -(-(_AFTER.size + max_key + _MAC_SIZE) // 3)
    body = _unseal(scope, token, longest, "query", lambda body: len(body) >= _AFTER.size)
    _, id_ = _AFTER.unpack_from(body)
    return body[_AFTER.size :], id_


def _seal(scope: bytes, body: bytes) -> str:
    """`body` and its checksum over `body` and `scope`, as url-safe base64."""
    mac = blake2b(body + scope, digest_size=_MAC_SIZE).digest()
    return urlsafe_b64encode(body + mac).rstrip(b"=").decode("ascii")


def _unseal(
    scope: bytes, token: object, longest: int, issuer: str, fits: Callable[[bytes], bool]
) -> bytes:
    """The body `_seal` put in `token`, checked: our version, a body that `fits`, our scope."""
    if not isinstance(token, str) or not 0 < len(token) <= longest:
        raise InvalidCursor(f"a cursor is a short string returned by a page, got {shown(token)}")
    try:
        raw = urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise InvalidCursor(f"malformed cursor {shown(token)}") from None
    body, mac = raw[:-_MAC_SIZE], raw[-_MAC_SIZE:]
    if not body or body[0] != _VERSION or not fits(body):
        raise InvalidCursor(f"malformed cursor {shown(token)}")
    if blake2b(body + scope, digest_size=_MAC_SIZE).digest() != mac:
        raise InvalidCursor(
            f"cursor {shown(token)} was not issued for this {issuer}; start from None"
        )
    return body


@lru_cache(maxsize=8)
def _layout(key_size: int) -> struct.Struct:
    return struct.Struct(f">BB{key_size}q")


def paginate(
    scan: Scan[T],
    key: Callable[[T], CursorKey],
    scope: bytes | Callable[[], bytes],
    seek: Seek,
    limit: int,
) -> tuple[list[T], str | None, str | None]:
    """Read one page at `seek` with one scan: (items in list order, next, prev cursors).
    `scope` may be given as a function, called only when a cursor is made (describing
    a union of many lists costs more than a short page of it)."""
    return page_of(list(scan(seek, limit + 1)), key, scope, seek, limit)


def page_of(
    rows: list[T],
    key: Callable[[T], CursorKey],
    scope: bytes | Callable[[], bytes],
    seek: Seek,
    limit: int,
) -> tuple[list[T], str | None, str | None]:
    """`paginate` of the `limit + 1` rows its scan read at `seek`, given (a list the
    page keeps): for a caller that has read them already."""
    onwards = len(rows) > limit
    del rows[limit:]
    came_from_elsewhere = seek.boundary is not None
    if not seek.forward:
        rows.reverse()
    if not rows:
        if not came_from_elsewhere:
            return rows, None, None
        onwards = False  # an empty page: only the way back can lead anywhere
    if seek.forward:
        has_next, has_prev = onwards, came_from_elsewhere
    else:
        has_next, has_prev = came_from_elsewhere, onwards
    if not (has_next or has_prev):  # (a short first page: no cursor, nothing to seal)
        return rows, None, None
    sealed = scope() if callable(scope) else scope
    if rows:
        ahead = Seek(True, key(rows[-1]), False)
        behind = Seek(False, key(rows[0]), False)
    else:
        ahead = behind = Seek(not seek.forward, seek.boundary, not seek.inclusive)
    return (
        rows,
        encode(sealed, ahead) if has_next else None,
        encode(sealed, behind) if has_prev else None,
    )
