from __future__ import annotations

import pytest

from assocdb import DataTooLarge, InvalidRequest
from assocdb.core import json
from assocdb.core.json import decode, encode


def test_round_trip() -> None:
    value = {"a": [1, 2.5, "x", None, True, {"b": []}], "big": 2**70}
    assert decode(encode(value, 1000, "data")) == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (float("nan"), "NaN"),
        ({"x": [1, float("inf")]}, r"data\['x'\]\[1\]"),
        ({1: "a"}, "keys are strings"),
        ({"a": {2: 3}}, "keys are strings"),
        ({"s": {1, 2}}, r"data\['s'\] is a set"),
        (object(), "is a object"),
        ([b"raw"], r"data\[0\] is a bytes"),
    ],
)
def test_values_json_cannot_hold_are_refused(value: object, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        encode(value, 1000, "data")


def test_deep_nesting_is_refused() -> None:
    value: object = []
    for _ in range(100):
        value = [value]
    with pytest.raises(InvalidRequest, match="nested"):
        encode(value, 10_000, "data")


def test_size_limit_counts_encoded_bytes() -> None:
    assert encode("x" * 8, 10, "data") == b'"xxxxxxxx"'
    with pytest.raises(DataTooLarge, match="11 bytes as JSON; the limit is 10"):
        encode("x" * 9, 10, "data")


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (b'{"a": 1, "a": 2}', "a"),
        (b'{"data": {"name": "x", "age": 3, "name": "y"}}', "name"),
        (b'[{"ok": 1}, {"b": [{"c": 1, "c": 1}]}]', "c"),
        ('{"é": 1, "\\u00e9": 2}'.encode(), "é"),  # the same key, spelled two ways
    ],
)
def test_a_key_named_twice_in_one_object_is_refused(raw: bytes, key: str) -> None:
    with pytest.raises(InvalidRequest, match=f"names the key {key!r} twice"):
        json.refuse_duplicate_keys(raw, "the body")


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": 1, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}]}',  # one key in different objects
        b"{not json",  # left to the decoder, which says what is wrong
        b"[" * 5000 + b"]" * 5000,
        b"",
    ],
)
def test_unique_keys_and_what_is_not_json_pass(raw: bytes) -> None:
    json.refuse_duplicate_keys(raw, "the body")


def test_many_stored_values_decode_in_one_parse_as_each_would_alone() -> None:
    values = [None, "s", 7, -1.5, True, [1, {"a": None}], {"k": ["v"]}, "", "a,b]"]
    raws = [None if v is None else encode(v, 1000, "data") for v in values]
    raws.append(b"null")  # JSON null, stored
    assert json.decode_all(raws) == [*values, None]
    assert json.decode_all([]) == []
