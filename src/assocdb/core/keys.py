"""Order-preserving encoding of index keys: tuples of JSON scalars as bytes.

A secondary index stores each entry's key as bytes, so that comparing two
encoded keys byte by byte (what every SQL engine does with a BLOB/VARBINARY)
gives the same answer as comparing the values. Equality and range queries are
then plain range scans of one B-tree.

The value order is: null < false < true < numbers < strings, then within a
kind the natural order (numbers by value, whatever int or float; strings by
code point). Each component is a tag byte, then:

* numbers: the IEEE-754 double of the value with the sign bit flipped (all
  bits flipped for negatives), big-endian, so byte order is numeric order;
  then 2 bytes of the integer's distance from that double (an int above
  2**53 may not be a double exactly; the offset is below 2**11, so 1 and 1.0
  encode alike, as JSON equality would have it);
* strings: UTF-8, with NUL escaped as 00 FF and ended by 00 00, so a string
  sorts before every longer string it is a prefix of.

Components are self-delimiting, so a key prefix is a byte prefix, and every
tag is below FF: `prefix + b"\\xff"` is an upper bound of all keys that
start with `prefix` (`upper`).

Pure functions, no I/O. `encode(decode(b)) == b` and `decode(encode(t)) == t`
(ints and integral floats both decode to int; -0.0 encodes as 0.0).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

from .errors import InvalidRequest

Scalar = None | bool | int | float | str
KeyTuple = tuple[Scalar, ...]

_NULL, _FALSE, _TRUE, _NUMBER, _STRING = 0x02, 0x03, 0x04, 0x05, 0x06
_MAX_INT = 2**63 - 1
_MIN_INT = -(2**63)
_DOUBLE = struct.Struct(">Q")
_OFFSET = struct.Struct(">H")
_OFFSET_BIAS = 1 << 15
MAX_KEY_BYTES = 1024  # keys must fit an index B-tree (MySQL: 3072 bytes per index)


def encode(values: Sequence[object], what: str = "index key") -> bytes:
    """The order-preserving bytes of a tuple of JSON scalars; InvalidRequest otherwise."""
    out = bytearray()
    for value in values:
        _encode_one(value, out, what)
    if len(out) > MAX_KEY_BYTES:
        raise InvalidRequest(
            f"{what} is {len(out):,} bytes encoded; index keys are limited to {MAX_KEY_BYTES:,}"
        )
    return bytes(out)


def upper(prefix: bytes) -> bytes:
    """The least byte string above every key that starts with `prefix`."""
    return prefix + b"\xff"


def indexable(value: object) -> bool:
    """True if `value` can be part of an index key."""
    if value is None or isinstance(value, (bool, str)):
        return True
    if isinstance(value, int):
        return _MIN_INT <= value <= _MAX_INT
    return isinstance(value, float) and math.isfinite(value)


def _encode_one(value: object, out: bytearray, what: str) -> None:
    if value is None:
        out.append(_NULL)
    elif value is True:
        out.append(_TRUE)
    elif value is False:
        out.append(_FALSE)
    elif isinstance(value, (int, float)) and indexable(value):
        out.append(_NUMBER)
        out += _number(value)
    elif isinstance(value, str):
        out.append(_STRING)
        raw = value.encode("utf-8", "surrogatepass")
        out += raw.replace(b"\x00", b"\x00\xff")
        out += b"\x00\x00"
    else:
        raise InvalidRequest(
            f"{what}: {value!r} cannot be indexed; index values must be null, true, false, "
            f"a finite number (integers within 64 bits) or a string"
        )


def _number(value: int | float) -> bytes:
    double = float(value) + 0.0  # + 0.0 turns -0.0 into 0.0
    offset = value - int(double) if isinstance(value, int) else 0
    bits: int = _DOUBLE.unpack(struct.pack(">d", double))[0]
    bits = bits ^ 0xFFFF_FFFF_FFFF_FFFF if bits >> 63 else bits | 1 << 63
    return _DOUBLE.pack(bits) + _OFFSET.pack(offset + _OFFSET_BIAS)


def decode(raw: bytes) -> KeyTuple:
    """The tuple `encode` made these bytes from (ValueError if they are not a key)."""
    values: list[Scalar] = []
    at = 0
    while at < len(raw):
        tag = raw[at]
        at += 1
        if tag == _NULL:
            values.append(None)
        elif tag in (_FALSE, _TRUE):
            values.append(tag == _TRUE)
        elif tag == _NUMBER:
            values.append(_decode_number(raw[at : at + 10]))
            at += 10
        elif tag == _STRING:
            end = _string_end(raw, at)
            values.append(
                raw[at:end].replace(b"\x00\xff", b"\x00").decode("utf-8", "surrogatepass")
            )
            at = end + 2
        else:
            raise ValueError(f"not an index key: tag {tag:#x} at byte {at - 1}")
    return tuple(values)


def _decode_number(chunk: bytes) -> int | float:
    if len(chunk) != 10:
        raise ValueError("not an index key: a number is cut short")
    bits: int = _DOUBLE.unpack(chunk[:8])[0]
    bits = bits ^ (1 << 63) if bits >> 63 else bits ^ 0xFFFF_FFFF_FFFF_FFFF
    double: float = struct.unpack(">d", _DOUBLE.pack(bits))[0]
    offset: int = _OFFSET.unpack(chunk[8:])[0] - _OFFSET_BIAS
    if double.is_integer() and -(2.0**63) <= double <= 2.0**63:
        whole = int(double) + offset
        if _MIN_INT <= whole <= _MAX_INT:
            return whole
    return double


def _string_end(raw: bytes, at: int) -> int:
    while True:
        end = raw.find(b"\x00", at)
        if end < 0 or end + 1 >= len(raw):
            raise ValueError("not an index key: a string is not terminated")
        if raw[end + 1] == 0x00:
            return end
        at = end + 2
