"""Validated JSON encoding for object and association data.

msgspec encodes fast but is lenient in ways that would silently change a
user's data: NaN and ±inf become `null`, non-string dict keys become strings,
sets become arrays and bytes become base64 strings. All are refused here, with
a message that says where in the value the problem is, before anything is
stored.
"""

from __future__ import annotations

import json as _stdlib
import math
from typing import Any

import msgspec

from .errors import DataTooLarge, InvalidRequest

MAX_DEPTH = 64

_encode = msgspec.json.encode
_decode = msgspec.json.decode


def encode(value: object, limit: int, what: str) -> bytes:
    """Return `value` as JSON bytes, or raise InvalidRequest / DataTooLarge."""
    _check(value, what, 0)
    try:
        raw = _encode(value)
    except UnicodeEncodeError as exc:  # found by the encoder, at no cost to good data
        bad = exc.object[exc.start : exc.end]
        raise InvalidRequest(
            f"{what} holds a string with {bad!r}, a lone surrogate: not Unicode text that "
            "JSON (UTF-8) can hold"
        ) from None
    if len(raw) > limit:
        raise DataTooLarge(
            f"{what} is {len(raw):,} bytes as JSON; the limit is {limit:,}",
            size=len(raw),
            limit=limit,
        )
    return raw


def check(value: object, what: str) -> None:
    """InvalidRequest if encoding `value` as JSON would change it (see the module doc)."""
    if type(value) not in _SCALARS:
        _check(value, what, 0)


def decode(raw: bytes) -> Any:
    """The JSON value stored as `raw`."""
    return _decode(raw)


def decode_all(raws: list[bytes | None]) -> list[Any]:
    """The JSON values stored as `raws` (None: no value), decoded in one call: a
    list of many rows' data costs one parse, not one Python call per row."""
    joined = b",".join([b"null" if raw is None else raw for raw in raws])
    values: list[Any] = _decode(b"[%b]" % joined)
    return values


def refuse_duplicate_keys(raw: bytes, what: str) -> None:
    """InvalidRequest if an object in the JSON text `raw` names a key twice: which of
    its values was meant is anyone's guess (RFC 8259 leaves it to the reader, and
    msgspec, like most, silently keeps the last). Text that is not JSON, or nests
    too deeply, passes: the decoder then says what is wrong with it."""
    try:
        _stdlib.loads(raw, object_pairs_hook=_unique_pairs)
    except _Duplicate as exc:
        raise InvalidRequest(
            f"{what} names the key {exc.key!r} twice in one object; name each key once"
        ) from None
    except (ValueError, RecursionError):
        return


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> None:
    if len(pairs) > 1:
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)


def _check(value: object, where: str, depth: int) -> None:
    kind = type(value)
    if kind in _SCALARS:
        return
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise InvalidRequest(f"{where} is {value}; JSON has no NaN or infinity")
        return
    if kind is not dict and kind is not list and kind is not tuple:
        raise InvalidRequest(
            f"{where} is a {kind.__name__}; JSON holds only objects (dict), arrays (list), "
            f"strings, numbers, true/false and null"
        )
    if depth >= MAX_DEPTH:
        raise InvalidRequest(f"{where} is nested more than {MAX_DEPTH} levels deep")
    if kind is dict:
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise InvalidRequest(f"{where} has a key {key!r}; JSON object keys are strings")
            if type(item) not in _SCALARS:
                _check(item, f"{where}[{key!r}]", depth + 1)
    else:
        for index, item in enumerate(value):  # type: ignore[arg-type]
            if type(item) not in _SCALARS:
                _check(item, f"{where}[{index}]", depth + 1)


_SCALARS = frozenset({str, int, bool, type(None)})
