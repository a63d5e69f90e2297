"""Ids as JSON strings, for clients whose numbers are doubles (JavaScript).

Ids are 64-bit integers; `JSON.parse` reads every number as a double, exact
only up to 2^53, so `7562451325520991901` arrives as `7562451325520992000` —
another object's id. A request that says `X-Assocdb-Ids: string` (or carries
`?ids=string`) gets every id in its answer as a decimal string, and may send
ids as strings too. The rest of the server sees only integers: the body is
rewritten before it is decoded, the answer after it is encoded.

Which values are ids is a matter of field names (`ID_FIELDS`), the vocabulary
of the wire types in `client.wire` and `core.records`; an object's `data` is
the user's own JSON and is left as it is.
"""

from __future__ import annotations

from typing import Any

import msgspec

HEADER = "x-assocdb-ids"

#: Fields that hold an id, or a list of ids, in requests and answers.
ID_FIELDS = frozenset({"id", "id1", "id2", "ids", "id2s", "node", "near", "author", "item", "user"})

#: Fields whose value is the user's JSON, never rewritten.
_OPAQUE = frozenset({"data"})


def wants_strings(headers: Any, query: str) -> bool:
    """Whether a request asks for ids as strings (`headers`: a Starlette Headers)."""
    if str(headers.get(HEADER, "")).strip().lower() == "string":
        return True
    return any(part.strip().lower() == "ids=string" for part in query.split("&"))


def parse_ids(body: bytes) -> bytes:
    """The body with every id given as a decimal string made a number (a body that
    is not JSON is left for the decoder to refuse, with its message)."""
    try:
        value = msgspec.json.decode(body or b"{}")
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return body
    return msgspec.json.encode(_walk(value, _to_int))


def format_ids(payload: bytes) -> bytes:
    """The answer with every id a decimal string."""
    return msgspec.json.encode(_walk(msgspec.json.decode(payload), _to_str))


def _to_int(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit() and text.isascii():
            return int(text)
    return value


def _to_str(value: Any) -> Any:
    return str(value) if type(value) is int else value


def _walk(value: Any, convert: Any, is_id: bool = False) -> Any:
    if isinstance(value, dict):
        return {
            key: item if key in _OPAQUE else _walk(item, convert, key in ID_FIELDS)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_walk(item, convert, is_id) for item in value]
    return convert(value) if is_id else value
