"""Object data on disk: zlib-compressed when that pays, transparently.

Object data is a JSON object, so stored bytes always start with `{`. Data of
at least `THRESHOLD` bytes that zlib shrinks by at least `MIN_SAVING` is
stored as a zero byte followed by the zlib stream instead; `unpack` tells
the two apart by the first byte, so rows written before compression existed
read as they are. Backends call these two functions at their storage edge;
everything above them (the merge rule, the cache, the journal) sees plain JSON.
"""

from __future__ import annotations

import zlib

THRESHOLD = 256  # below this, zlib's header and checksum eat most of the saving
MIN_SAVING = 32  # bytes: not worth a decompress on every read otherwise
LEVEL = 6
_ZLIB = b"\x00"


def pack(data: bytes) -> bytes:
    """The stored form of object data: compressed if that saves enough."""
    if len(data) < THRESHOLD:
        return data
    packed = _ZLIB + zlib.compress(data, LEVEL)
    return packed if len(packed) + MIN_SAVING <= len(data) else data


def unpack(stored: bytes) -> bytes:
    """The object data a stored value holds (compressed or not)."""
    if stored[:1] == _ZLIB:
        return zlib.decompress(memoryview(stored)[1:])
    return bytes(stored)
